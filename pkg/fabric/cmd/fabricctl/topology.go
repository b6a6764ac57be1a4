package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/internal/codec"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

func runTopology(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("topology: want apply or show")
	}
	fs := flag.NewFlagSet("topology "+args[0], flag.ContinueOnError)
	file := fs.String("file", "", "YAML topology description (default: the platform topology)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	desc := topology.Platform()
	if *file != "" {
		var err error
		if desc, err = topology.LoadFile(*file); err != nil {
			return err
		}
	}
	if _, err := codec.For(desc); err != nil {
		return err
	}
	switch args[0] {
	case "show":
		printTopology(stdout, desc)
		return nil
	case "apply":
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := broker.Dial(dctx, amqpURL(getenv), broker.Options{Name: "fabricctl"})
		if err != nil {
			return err
		}
		defer conn.Close()
		c, err := conn.Connection(dctx)
		if err != nil {
			return err
		}
		if err := topology.Apply(dctx, c, desc); err != nil {
			return err
		}
		printTopology(stdout, desc)
		fmt.Fprintf(stdout, "applied: %d exchanges, %d consumer queues\n", len(desc.Exchanges), len(desc.Consumers))
		return nil
	}
	return fmt.Errorf("topology: unknown subcommand %q", args[0])
}

func printTopology(w io.Writer, d topology.Description) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if d.Name != "" {
		codecName := d.Codec
		if codecName == "" {
			codecName = topology.CodecAgora
		}
		fmt.Fprintf(tw, "TOPOLOGY %s\tcodec %s", d.Name, codecName)
		if d.Tenant != "" {
			fmt.Fprintf(tw, ", fixed tenant %s", d.Tenant)
		}
		if d.Events != "" {
			fmt.Fprintf(tw, ", publishes on %s", d.Events)
		}
		fmt.Fprintln(tw)
		if len(d.Consumers) > 0 {
			c := d.Consumers[0]
			fmt.Fprintf(tw, "\tdead letters via %s, retries via %s\n", c.DeadLetterExchange(), c.RetryExchange())
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "EXCHANGE\tTYPE")
	for _, e := range d.Exchanges {
		fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.Type)
	}
	fmt.Fprintln(tw, "\nQUEUE\tSERVICE\tBINDINGS / ARGUMENTS")
	printed := map[string]bool{} // a shared DLQ once
	for _, c := range d.Consumers {
		var b []string
		for _, bd := range c.Bindings {
			b = append(b, bd.Exchange+" "+bd.Key)
		}
		if c.Prefetch > 0 {
			b = append(b, fmt.Sprintf("prefetch %d", c.Prefetch))
		}
		if c.Pace != nil {
			b = append(b, fmt.Sprintf("paced %g/s", c.Pace.PerSecond))
		}
		for _, q := range c.Queues() {
			if printed[q.Name] {
				continue
			}
			printed[q.Name] = true
			desc := formatArgs(q.Args)
			if q.Name == c.Queue {
				desc = strings.Join(b, ", ") + "; " + desc
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", q.Name, c.Service, desc)
		}
	}
	tw.Flush()
}

func formatArgs(args map[string]any) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, args[k]))
	}
	return strings.Join(parts, " ")
}
