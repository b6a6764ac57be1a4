package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

const explainUsage = `usage: fabricctl explain TYPE [--workflow URL --token JWT]

  The type's catalog definition and schema (from this build's catalog) and,
  with --workflow and --token (or WORKFLOW_URL and AGORA_TOKEN), the token
  tenant's active subscriptions to it: filter, policy, reaction and what the
  reaction can lead the workflow to emit (GET /v1/explain/TYPE).
`

const subscriptionUsage = `usage: fabricctl subscription <list|show|create|version|move|rollback> [flags]
       --workflow URL --token JWT (or WORKFLOW_URL and AGORA_TOKEN)

  list
  show      --id ID                         every version and audited transition
  create    --file SPEC.json                version 1, in DRAFT
  version   --id ID --file SPEC.json        the next version, in DRAFT
  move      --id ID --version N --to STATE --reason WHY
  rollback  --id ID --reason WHY
`

// workflowClient calls a service's REST API (the workflow's, unless made
// for another) with a token.
type workflowClient struct {
	base, token string
	http        *http.Client
	// need says which flags (or variables) a call needs.
	need string
}

func newWorkflowClient(fs *flag.FlagSet, getenv func(string) string) (*workflowClient, *string, *string) {
	url := fs.String("workflow", getenv("WORKFLOW_URL"), "the workflow service's base URL")
	token := fs.String("token", getenv("AGORA_TOKEN"), "a JWT of the tenant (attendant or operator)")
	return &workflowClient{http: &http.Client{Timeout: 30 * time.Second}, need: "--workflow and --token (or WORKFLOW_URL and AGORA_TOKEN)"}, url, token
}

// call sends method path with body (JSON, when not nil) and decodes a 2xx
// answer into out; any other answer is an error carrying the problem.
func (c *workflowClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	if c.base == "" || c.token == "" {
		return errors.New(c.need + " are required")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var p struct{ Detail, Title string }
		if json.Unmarshal(data, &p) == nil && (p.Detail != "" || p.Title != "") {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(p.Title+": "+p.Detail))
		}
		return fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
	}
	return json.Unmarshal(data, out)
}

func runExplain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	client, url, token := newWorkflowClient(fs, getenv)
	var typ string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		typ, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if typ == "" && fs.NArg() == 1 {
		typ = fs.Arg(0)
	}
	if typ == "" {
		fmt.Fprint(stderr, explainUsage)
		return errors.New("explain: which type?")
	}
	reg, err := registry.Default()
	if err != nil {
		return err
	}
	def, ok := reg.Lookup(typ)
	if !ok {
		return fmt.Errorf("explain: %s is not in the catalog", typ)
	}
	fmt.Fprintf(stdout, "%s  %s, owner %s, scope %s, %s, replayable %v\n  %s\n", def.Type, def.Kind, def.Owner, def.Scope,
		def.Sensitivity, def.Replayable, def.Description)
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(def.Schema, &schema)
	fields := make([]string, 0, len(schema.Properties))
	for name := range schema.Properties {
		fields = append(fields, name)
	}
	slices.Sort(fields)
	fmt.Fprintf(stdout, "  payload: %s (required: %s)\n", strings.Join(fields, ", "), strings.Join(schema.Required, ", "))
	// Who receives it on this platform: this build's catalog.
	fmt.Fprintf(stdout, "  consumers: %s\n", orNone(def.Consumers))
	if *url == "" && *token == "" {
		fmt.Fprintln(stdout, "  subscriptions: pass --workflow and --token to list the tenant's")
		return nil
	}
	client.base, client.token = *url, *token
	var ex struct {
		WaitingSteps []struct {
			Definition string `json:"definition"`
			Step       string `json:"step"`
		} `json:"waitingSteps"`
		Subscriptions []struct {
			ID       string          `json:"id"`
			Version  int             `json:"version"`
			Name     string          `json:"name"`
			Filter   string          `json:"filter"`
			Policy   json.RawMessage `json:"policy"`
			Reaction json.RawMessage `json:"reaction"`
			Emits    []string        `json:"emits"`
		} `json:"subscriptions"`
	}
	if err := client.call(ctx, http.MethodGet, "/v1/explain/"+typ, nil, &ex); err != nil {
		return fmt.Errorf("explain: %w", err)
	}
	var waiting []string
	for _, w := range ex.WaitingSteps {
		waiting = append(waiting, w.Definition+"/"+w.Step)
	}
	fmt.Fprintf(stdout, "  process steps waiting for it: %s\n", orNone(waiting))
	if len(ex.Subscriptions) == 0 {
		fmt.Fprintln(stdout, "  subscriptions: none active in this tenant")
	}
	for _, s := range ex.Subscriptions {
		fmt.Fprintf(stdout, "  subscription %q (%s v%d)\n    filter:   %s\n    policy:   %s\n    reaction: %s\n    emits:    %s\n",
			s.Name, s.ID, s.Version, orAll(s.Filter), s.Policy, s.Reaction, strings.Join(s.Emits, ", "))
	}
	return nil
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func orAll(filter string) string {
	if strings.TrimSpace(filter) == "" {
		return "(every event)"
	}
	return filter
}

func runSubscription(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		fmt.Fprint(stderr, subscriptionUsage)
		return errors.New("subscription: missing subcommand")
	}
	fs := flag.NewFlagSet("subscription "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	client, url, token := newWorkflowClient(fs, getenv)
	id := fs.String("id", "", "the subscription's id")
	file := fs.String("file", "", "a JSON spec: {name, eventTypes, filter, policy, reaction}")
	version := fs.Int("version", 0, "the version to move")
	to := fs.String("to", "", "the state to move it to")
	reason := fs.String("reason", "", "why (recorded in the audit)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	client.base, client.token = *url, *token
	spec := func() ([]byte, error) {
		if *file == "" {
			return nil, errors.New("--file is required")
		}
		return os.ReadFile(*file)
	}
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("subscription %s: %s is required", args[0], what)
		}
		return nil
	}
	var out any
	var err error
	switch args[0] {
	case "list":
		var list []map[string]any
		if err = client.call(ctx, http.MethodGet, "/v1/subscriptions", nil, &list); err == nil {
			tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tVERSION\tSTATE\tNAME\tTYPES")
			for _, s := range list {
				fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\n", s["id"], s["version"], s["state"], s["name"], s["eventTypes"])
			}
			return tw.Flush()
		}
	case "show":
		if err = need(*id != "", "--id"); err == nil {
			err = client.call(ctx, http.MethodGet, "/v1/subscriptions/"+*id, nil, &out)
		}
	case "create", "version":
		var body []byte
		if body, err = spec(); err == nil {
			path := "/v1/subscriptions"
			if args[0] == "version" {
				if err = need(*id != "", "--id"); err != nil {
					break
				}
				path += "/" + *id + "/versions"
			}
			err = client.call(ctx, http.MethodPost, path, body, &out)
		}
	case "move":
		if err = need(*id != "" && *version > 0 && *to != "" && *reason != "", "--id, --version, --to and --reason"); err == nil {
			body, _ := json.Marshal(map[string]string{"to": *to, "reason": *reason})
			err = client.call(ctx, http.MethodPost, fmt.Sprintf("/v1/subscriptions/%s/versions/%d/transitions", *id, *version), body, &out)
		}
	case "rollback":
		if err = need(*id != "" && *reason != "", "--id and --reason"); err == nil {
			body, _ := json.Marshal(map[string]string{"reason": *reason})
			err = client.call(ctx, http.MethodPost, "/v1/subscriptions/"+*id+"/rollback", body, &out)
		}
	default:
		fmt.Fprint(stderr, subscriptionUsage)
		return fmt.Errorf("subscription: unknown subcommand %q", args[0])
	}
	if err != nil {
		return fmt.Errorf("subscription %s: %w", args[0], err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
