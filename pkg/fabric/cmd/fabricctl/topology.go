package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
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
		return fmt.Errorf("topology: want apply, check or show")
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
		return applyTopology(ctx, desc, getenv, stdout)
	case "check":
		return checkTopology(ctx, desc, getenv, stdout)
	}
	return fmt.Errorf("topology: unknown subcommand %q", args[0])
}

// applyTopology sets the description's policies (management API), declares
// again as topic exchanges those an earlier version declared direct
// (upgradeExchanges), declares its exchanges, queues and bindings (AMQP),
// upgrades the retry tiers an
// earlier version declared with their delay as an argument, and audits the
// policies that apply to its queues. Policies come first, so that a tier
// declared now has its policy from the start.
func applyTopology(ctx context.Context, desc topology.Description, getenv func(string) string, stdout io.Writer) error {
	m, err := newMgmt(getenv)
	if err != nil {
		return err
	}
	if err := applyPolicies(ctx, m, desc, stdout); err != nil {
		return fmt.Errorf("topology apply: the retry tiers' policies need the management API: %w", err)
	}
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
	exchanges, err := upgradeExchanges(dctx, c, m, desc, stdout)
	if err != nil {
		return err
	}
	if err := topology.Apply(dctx, c, desc); err != nil {
		return err
	}
	// Moving messages takes as long as there are messages: no 30 s bound.
	upgraded, err := upgradeTiers(ctx, c, m, desc, stdout)
	if err != nil {
		return err
	}
	printTopology(stdout, desc)
	fmt.Fprintf(stdout, "applied: %d exchanges (%d upgraded), %d consumer queues, %d retry tier policies, %d retry tiers upgraded\n",
		len(desc.Exchanges), exchanges, len(desc.Consumers), countPolicies(desc), upgraded)
	return audit(ctx, m, desc, stdout)
}

// checkTopology compares the broker with the description without changing
// anything: missing queues, retry tiers still declared the earlier way,
// upgrades left half done, and the policy audit. It fails on anything that
// apply would fix or that can cost a message.
func checkTopology(ctx context.Context, desc topology.Description, getenv func(string) string, stdout io.Writer) error {
	m, err := newMgmt(getenv)
	if err != nil {
		return err
	}
	queues, err := m.queues(ctx)
	if err != nil {
		return err
	}
	var findings []finding
	wrong, err := mistyped(ctx, m, desc)
	if err != nil {
		return err
	}
	for _, e := range desc.Exchanges {
		if what, ok := wrong[e.Name]; ok {
			findings = append(findings, finding{true, what + " (topic permissions do not narrow its keys): fabricctl topology apply upgrades it"})
		}
	}
	for _, q := range fabricQueues(desc) {
		bq, ok := queues[q.Name]
		switch {
		case !ok:
			findings = append(findings, finding{true, fmt.Sprintf("%s: missing (run fabricctl topology apply, or start its service)", q.Name)})
		case q.Kind == "tier" && legacyTier(bq):
			findings = append(findings, finding{true, fmt.Sprintf("%s: declared with x-message-ttl %v by an earlier version, which caps its delay "+
				"(the lower of argument and policy applies): fabricctl topology apply upgrades it", q.Name, bq.Arguments["x-message-ttl"])})
		}
		if _, ok := queues[q.Name+holdingSuffix]; ok && q.Kind == "tier" {
			findings = append(findings, finding{true, fmt.Sprintf("%s: an upgrade was left half done (%s exists): run fabricctl topology apply", q.Name, q.Name+holdingSuffix)})
		}
	}
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	err = audit(ctx, m, desc, stdout)
	if n := severeCount(findings); n > 0 {
		return errors.Join(fmt.Errorf("topology check: %d queue findings", n), err)
	}
	return err
}

// audit prints the policy audit and fails on a severe finding.
func audit(ctx context.Context, m *mgmtClient, desc topology.Description, stdout io.Writer) error {
	regular, err := m.policies(ctx, false)
	if err != nil {
		return err
	}
	operator, err := m.policies(ctx, true)
	if err != nil {
		var merr *mgmtError
		if !errors.As(err, &merr) || (merr.Status != http.StatusUnauthorized && merr.Status != http.StatusForbidden) {
			return err
		}
		fmt.Fprintf(stdout, "warning operator policies not audited: %v\n", err)
		operator = nil
	}
	findings := auditPolicies(desc, regular, operator)
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	if n := severeCount(findings); n > 0 {
		return fmt.Errorf("topology: %d policy findings put messages or the retry delays at risk (ERROR lines above)", n)
	}
	fmt.Fprintf(stdout, "policies: %d findings, none severe\n", len(findings))
	return nil
}

func severeCount(fs []finding) int {
	n := 0
	for _, f := range fs {
		if f.Severe {
			n++
		}
	}
	return n
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
			if q.Policy != nil {
				desc += "; policy " + q.Policy.Name + " " + formatArgs(q.Policy.Definition)
			}
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
