package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

const replayUsage = `usage: fabricctl replay <start|list|show|items|cancel> [flags]
       --service URL --token JWT (or SERVICE_URL and AGORA_TOKEN): the service that
       consumes the queue (e.g. http://127.0.0.1:8087 for analytics)

  start   --queue Q --mode DRY_RUN|SIMULATION|PRODUCTION --reason WHY
          [--type T,…] [--correlation-id ID] [--from RFC3339] [--to RFC3339] [--wait]
          the events of the token tenant's history (the data lake) the selection
          names, replayed to Q; --wait follows the job to its end. PRODUCTION needs
          the roles operator and replay-admin.
  list                        the tenant's latest replays
  show    --id ID             a replay and its progress
  items   --id ID [--after N] [--limit N]
                              each event and what became of it (a DRY_RUN's decisions)
  cancel  --id ID             stop a running replay where it is
`

type replayJob struct {
	ID          string         `json:"id"`
	Queue       string         `json:"queue"`
	Mode        string         `json:"mode"`
	Status      string         `json:"status"`
	Total       int            `json:"total"`
	Processed   int            `json:"processed"`
	Outcomes    map[string]int `json:"outcomes"`
	Reason      string         `json:"reason"`
	RequestedBy string         `json:"requestedBy"`
	CreatedAt   time.Time      `json:"createdAt"`
}

func (j replayJob) progress() string {
	keys := make([]string, 0, len(j.Outcomes))
	for k := range j.Outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, j.Outcomes[k])
	}
	line := fmt.Sprintf("%s %s %s: %s, %d of %d", j.ID, j.Mode, j.Queue, j.Status, j.Processed, j.Total)
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	return line
}

func runReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		fmt.Fprint(stderr, replayUsage)
		return errors.New("missing replay command")
	}
	fs := flag.NewFlagSet("replay "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("service", getenv("SERVICE_URL"), "the base URL of the service that consumes the queue")
	token := fs.String("token", getenv("AGORA_TOKEN"), "a JWT of the tenant's operator (and replay-admin for PRODUCTION)")
	id := fs.String("id", "", "the replay's id")
	queue := fs.String("queue", "", "the queue to replay to")
	mode := fs.String("mode", "DRY_RUN", "DRY_RUN, SIMULATION or PRODUCTION")
	reason := fs.String("reason", "", "why (the audit record)")
	types := fs.String("type", "", "event types, comma-separated")
	correlation := fs.String("correlation-id", "", "a correlation id")
	from := fs.String("from", "", "occurred at or after (RFC 3339)")
	to := fs.String("to", "", "occurred before (RFC 3339)")
	wait := fs.Bool("wait", false, "follow the job to its end")
	after := fs.Int("after", 0, "items after this sequence number")
	limit := fs.Int("limit", 100, "items per page")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c := &workflowClient{base: *base, token: *token, http: &http.Client{Timeout: 5 * time.Minute},
		need: "--service and --token (or SERVICE_URL and AGORA_TOKEN)"}
	needID := func() error {
		if *id == "" {
			return errors.New("--id is required")
		}
		return nil
	}
	switch args[0] {
	case "start":
		sel := map[string]any{}
		if *types != "" {
			sel["types"] = strings.Split(*types, ",")
		}
		if *correlation != "" {
			sel["correlationId"] = *correlation
		}
		for name, v := range map[string]string{"from": *from, "to": *to} {
			if v == "" {
				continue
			}
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return fmt.Errorf("--%s: want RFC 3339: %w", name, err)
			}
			sel[name] = v
		}
		body, err := json.Marshal(map[string]any{"queue": *queue, "mode": *mode, "reason": *reason, "selection": sel})
		if err != nil {
			return err
		}
		var job replayJob
		if err := c.call(ctx, http.MethodPost, "/v1/replays", body, &job); err != nil {
			return err
		}
		fmt.Fprintln(stdout, job.progress())
		for *wait && job.Status == "running" {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			if err := c.call(ctx, http.MethodGet, "/v1/replays/"+job.ID, nil, &job); err != nil {
				return err
			}
			fmt.Fprintln(stdout, job.progress())
		}
		return nil
	case "list":
		var jobs []replayJob
		if err := c.call(ctx, http.MethodGet, "/v1/replays", nil, &jobs); err != nil {
			return err
		}
		for _, j := range jobs {
			fmt.Fprintf(stdout, "%s  by %s: %q\n", j.progress(), j.RequestedBy, j.Reason)
		}
		return nil
	case "show", "cancel":
		if err := needID(); err != nil {
			return err
		}
		method, path := http.MethodGet, "/v1/replays/"+url.PathEscape(*id)
		if args[0] == "cancel" {
			method, path = http.MethodPost, path+"/cancel"
		}
		var job replayJob
		if err := c.call(ctx, method, path, nil, &job); err != nil {
			return err
		}
		fmt.Fprintln(stdout, job.progress())
		return nil
	case "items":
		if err := needID(); err != nil {
			return err
		}
		var items []struct {
			Seq                            int
			EventID, Type, Outcome, Detail string
		}
		path := fmt.Sprintf("/v1/replays/%s/items?after=%d&limit=%d", url.PathEscape(*id), *after, *limit)
		if err := c.call(ctx, http.MethodGet, path, nil, &items); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tEVENT\tTYPE\tOUTCOME\tDETAIL")
		for _, it := range items {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", it.Seq, it.EventID, it.Type, it.Outcome, it.Detail)
		}
		return tw.Flush()
	}
	fmt.Fprint(stderr, replayUsage)
	return fmt.Errorf("unknown replay command %q", args[0])
}
