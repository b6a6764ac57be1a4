package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/progress"
	"github.com/agora-platform/agora/pkg/fabric/migrations"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

const dlqUsage = `usage: fabricctl dlq <list|show|replay|purge|audit> --queue Q [flags]

  list    --queue Q [--limit N] [--json]
  show    --queue Q --id MESSAGE_ID
  replay  --queue Q (--ids a,b | --failure CODE | --type T | --tenant T | --all)
          --operator WHO --reason WHY [--dry-run]
  purge   same flags as replay
  audit   [--queue Q] [--limit N]

Q is the consumer queue (its DLQ is Q.dlq; with --topology FILE, the DLQ and
retry exchange that file names, e.g. car.dlq.Q or imoveis.dlq). Audit rows go to
<--audit-schema>.dlq_audit in DATABASE_URL (default schema fabric_ops).
--operator defaults to $FABRIC_OPERATOR; there is no anonymous replay.
`

func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		fmt.Fprint(stderr, dlqUsage)
		return fmt.Errorf("dlq: missing subcommand")
	}
	sub := args[0]
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.String("queue", "", "consumer queue whose DLQ to operate on")
	limit := fs.Int("limit", 50, "most letters/rows to print")
	asJSON := fs.Bool("json", false, "print JSON")
	id := fs.String("id", "", "message id (show)")
	ids := fs.String("ids", "", "comma-separated message ids")
	failure := fs.String("failure", "", "dead-letter reason code, e.g. PERMANENT_FAILURE")
	typ := fs.String("type", "", "message type")
	tenantID := fs.String("tenant", "", "tenant id")
	all := fs.Bool("all", false, "every letter")
	operator := fs.String("operator", getenv("FABRIC_OPERATOR"), "who is acting (required for replay/purge)")
	reason := fs.String("reason", "", "why (required for replay/purge)")
	dry := fs.Bool("dry-run", false, "show what would happen, change nothing")
	auditSchema := fs.String("audit-schema", "fabric_ops", "schema holding dlq_audit")
	topologyFile := fs.String("topology", "", "a topology file (deploy/topologies/…) whose DLQ and retry naming Q follows")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if sub != "audit" && *queue == "" {
		return fmt.Errorf("dlq %s: --queue is required", sub)
	}
	ops, closeOps, err := openOps(ctx, getenv, *auditSchema)
	if err != nil {
		return err
	}
	defer closeOps()
	if *topologyFile != "" {
		desc, err := topology.LoadFile(*topologyFile)
		if err != nil {
			return err
		}
		if _, ok := desc.Consumer(*queue); !ok && *queue != "" {
			return fmt.Errorf("dlq %s: %s has no queue %q", sub, *topologyFile, *queue)
		}
		ops = ops.For(desc.Consumers...)
	}

	filter := dlq.Filter{Reason: *failure, Type: *typ, Tenant: *tenantID, All: *all}
	if *ids != "" {
		filter.IDs = strings.Split(*ids, ",")
	}
	// Progress on stderr, at most every half second and at the end: how
	// many letters of how many, the rate and the time left.
	meter := progress.Start("letters examined", time.Now)
	var shown time.Time
	report := func(done, total int) {
		if done != total && time.Since(shown) < 500*time.Millisecond {
			return
		}
		shown = time.Now()
		fmt.Fprintf(stderr, "\r\033[K%s", meter.Line(done, total))
		if done == total {
			fmt.Fprintln(stderr)
		}
	}
	switch sub {
	case "list":
		letters, err := ops.List(ctx, *queue, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(letters)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MESSAGE ID\tTYPE\tTENANT\tREASON\tCLASS\tATTEMPTS\tLAST ATTEMPT\tERROR")
		for _, l := range letters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.60s\n", l.MessageID, l.Type, l.TenantID, l.Reason, l.ErrorClass, l.Attempts, l.LastAttempt, l.Error)
		}
		return tw.Flush()
	case "show":
		if *id == "" {
			return fmt.Errorf("dlq show: --id is required")
		}
		l, err := ops.Show(ctx, *queue, *id)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	case "replay", "purge":
		req := dlq.Request{Queue: *queue, Filter: filter, Operator: *operator, Reason: *reason, DryRun: *dry, Progress: report}
		var rep dlq.Report
		if sub == "replay" {
			rep, err = ops.Replay(ctx, req)
		} else {
			rep, err = ops.Purge(ctx, req)
		}
		// A refusal still has a report: the other letters were replayed.
		if err != nil && !errors.Is(err, dlq.ErrNotReplayable) {
			return err
		}
		verb := map[string]string{"replay": "replayed", "purge": "purged"}[sub]
		if rep.DryRun {
			fmt.Fprintf(stdout, "dry run: %d letters would be %s (audit #%d):\n", len(rep.Matched), verb, rep.AuditID)
		} else {
			fmt.Fprintf(stdout, "%d %s, %d failed (audit #%d):\n", rep.Succeeded, verb, rep.Failed, rep.AuditID)
		}
		for _, m := range rep.Matched {
			fmt.Fprintln(stdout, "  "+m)
		}
		for _, e := range rep.Errors {
			fmt.Fprintln(stdout, "  error: "+e)
		}
		return err
	case "audit":
		entries, err := ops.Audit(ctx, *queue, *limit)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tAT\tOPERATOR\tACTION\tQUEUE\tOK\tFAILED\tREASON\tFILTER")
		for _, a := range entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", a.ID, a.At.Format(time.RFC3339), a.Operator, a.Action, a.Queue, a.Succeeded, a.Failed, a.Reason, a.Filter)
		}
		return tw.Flush()
	}
	fmt.Fprint(stderr, dlqUsage)
	return fmt.Errorf("dlq: unknown subcommand %q", sub)
}

func openOps(ctx context.Context, getenv func(string) string, auditSchema string) (*dlq.Ops, func(), error) {
	dbURL := getenv("DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" // local-development default
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, nil, fmt.Errorf("audit database: %w", err)
	}
	if err := migrations.CreateSchema(ctx, pool, auditSchema); err != nil {
		pool.Close()
		return nil, nil, err
	}
	if err := migrations.Apply(ctx, pool, auditSchema); err != nil {
		pool.Close()
		return nil, nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(dctx, amqpURL(getenv), broker.Options{Name: "fabricctl-dlq"})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	reg, err := registry.Default()
	if err != nil {
		return nil, nil, err
	}
	pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{})
	if err != nil {
		return nil, nil, err
	}
	return dlq.New(conn, pub, reg, pool, auditSchema), func() { pub.Close(); conn.Close(); pool.Close() }, nil
}
