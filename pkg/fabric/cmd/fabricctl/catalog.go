package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/agora-platform/agora/pkg/fabric/internal/asyncapi"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

func runCatalog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("catalog: want list, show TYPE, check --against REF or asyncapi [-o FILE | --check FILE]")
	}
	if args[0] == "check" {
		// check reads catalogs from git and the working tree, not the
		// embedded one, so it must not depend on the embedded one loading.
		return runCatalogCheck(ctx, args[1:], stdout, stderr)
	}
	if args[0] == "asyncapi" {
		return runCatalogAsyncAPI(args[1:], stdout)
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

// runCatalogAsyncAPI writes the AsyncAPI document of the catalog and the
// platform topology to stdout or -o FILE; with --check FILE it writes
// nothing and fails when FILE is not what the code generates (make lint).
func runCatalogAsyncAPI(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("catalog asyncapi", flag.ContinueOnError)
	out := fs.String("o", "", "write the document to this file instead of stdout")
	check := fs.String("check", "", "compare this file with the generated document; fail on any difference")
	host := fs.String("host", "rabbitmq:5671", "the broker in the servers object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	reg, err := registry.Default()
	if err != nil {
		return err
	}
	doc, err := asyncapi.Generate(reg, topology.Platform(), asyncapi.Options{
		Title: "Agora platform messaging", Host: *host, Vhost: "agora"})
	if err != nil {
		return err
	}
	switch {
	case *check != "":
		have, err := os.ReadFile(*check)
		if err != nil {
			return fmt.Errorf("catalog asyncapi: %w", err)
		}
		if !bytes.Equal(have, doc) {
			return fmt.Errorf("catalog asyncapi: %s is stale: run `make generate`", *check)
		}
		return nil
	case *out != "":
		if err := os.WriteFile(*out, doc, 0o644); err != nil {
			return fmt.Errorf("catalog asyncapi: %w", err)
		}
		return nil
	}
	_, err = stdout.Write(doc)
	return err
}
