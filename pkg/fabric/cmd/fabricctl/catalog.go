package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

func runCatalog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("catalog: want list, show TYPE or check --against REF")
	}
	if args[0] == "check" {
		// check reads catalogs from git and the working tree, not the
		// embedded one, so it must not depend on the embedded one loading.
		return runCatalogCheck(ctx, args[1:], stdout, stderr)
	}
	reg, err := registry.Default()
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tKIND\tSCOPE\tSENSITIVITY\tREPLAYABLE\tOWNER")
		for _, d := range reg.All() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", d.Type, d.Kind, d.Scope, d.Sensitivity, d.Replayable, d.Owner)
		}
		return tw.Flush()
	case "show":
		if len(args) != 2 {
			return fmt.Errorf("catalog show: want exactly one TYPE")
		}
		d, ok := reg.Lookup(args[1])
		if !ok {
			return fmt.Errorf("catalog show: %w: %s (see `fabricctl catalog list`)", registry.ErrUnknownType, args[1])
		}
		fmt.Fprintf(stdout, "type:        %s\nversion:     %s\nkind:        %s\ndomain:      %s\nowner:       %s\nscope:       %s\nsensitivity: %s\nreplayable:  %v\nsensitive:   %v\nschema file: %s\ndescription: %s\n\n%s\n",
			d.Type, d.Version, d.Kind, d.Domain, d.Owner, d.Scope, d.Sensitivity, d.Replayable, d.SensitiveFields, d.SchemaFile, d.Description, d.Schema)
		return nil
	}
	return fmt.Errorf("catalog: unknown subcommand %q", args[0])
}
