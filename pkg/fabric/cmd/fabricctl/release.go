package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/agora-platform/agora/pkg/fabric/catalog"
	"github.com/agora-platform/agora/pkg/fabric/filter"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

const releaseUsage = `usage: fabricctl release <build|check|apply|rollback> [flags]

  build     --release ID --subscriptions DIR --workflows FILE [--catalog DIR] --out FILE
            One versioned bundle of what a release ships together: the event
            definitions (this build's catalog, or DIR holding catalog.yaml and
            <domain>/<type>.json), the workflow definitions (FILE: the workflow
            service's definitions.json) and the tenants' subscriptions
            (DIR/<tenant>/<name>.json, each a spec as 'subscription create' takes).
  check     --bundle FILE
            Validates the bundle as a whole: its catalog loads; each subscription's
            event types, filter, policy rules and agent projection compile against
            this release's schemas; each reaction against this release's workflow
            definitions; each workflow step's waitFor against its catalog.
  apply     --bundle FILE --reason WHY --workflow URL --token JWT
            Checks, then, for the token's tenant only, creates or versions each of
            its subscriptions in the bundle and submits the version for approval
            (VALIDATING). A second person approves and activates it, as for any
            version ('subscription move'). Every step is in the workflow's audit,
            its reason naming the release.
  rollback  --bundle FILE --reason WHY --workflow URL --token JWT
            Rolls each of the tenant's subscriptions in the bundle back to the
            version active before it (audited, the reason naming the release).
`

// bundle is a release: what ships together, checked together.
type bundle struct {
	Release string `json:"release"`
	// Catalog holds catalog.yaml and <domain>/<type>.json, as text.
	Catalog map[string]string `json:"catalog"`
	// Workflows is the workflow service's definitions.json.
	Workflows json.RawMessage `json:"workflows"`
	// Subscriptions are the tenants' subscription specs, by tenant and name.
	Subscriptions []bundledSubscription `json:"subscriptions"`
	// Digest is the sha256 of the bundle with Digest empty: check refuses
	// a bundle edited after build.
	Digest string `json:"digest"`
}

type bundledSubscription struct {
	Tenant string          `json:"tenant"`
	Spec   json.RawMessage `json:"spec"`
}

// specView is what check reads of a subscription spec; the workflow
// service validates the whole spec again when a version is created.
type specView struct {
	Name       string   `json:"name"`
	EventTypes []string `json:"eventTypes"`
	Filter     string   `json:"filter"`
	Policy     struct {
		Rules []struct {
			When string `json:"when"`
		} `json:"rules"`
	} `json:"policy"`
	Reaction struct {
		Kind         string `json:"kind"`
		DefinitionID string `json:"definitionId"`
	} `json:"reaction"`
	Agent *struct {
		Project []string `json:"project"`
	} `json:"agent"`
}

// workflowsView is what check reads of definitions.json.
type workflowsView struct {
	Default     string `json:"default"`
	Definitions []struct {
		ID    string `json:"id"`
		Steps []struct {
			Name    string `json:"name"`
			WaitFor string `json:"waitFor"`
		} `json:"steps"`
	} `json:"definitions"`
}

func runRelease(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		fmt.Fprint(stderr, releaseUsage)
		return errors.New("release: missing subcommand")
	}
	fs := flag.NewFlagSet("release "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	client, url, token := newWorkflowClient(fs, getenv)
	release := fs.String("release", "", "the release's id (build)")
	subs := fs.String("subscriptions", "", "a directory of <tenant>/<name>.json subscription specs (build)")
	workflows := fs.String("workflows", "", "the workflow definitions file, definitions.json (build)")
	catalogDir := fs.String("catalog", "", "a catalog directory; empty: this build's catalog (build)")
	out := fs.String("out", "", "where to write the bundle (build)")
	file := fs.String("bundle", "", "the bundle (check, apply, rollback)")
	reason := fs.String("reason", "", "why (apply, rollback: recorded in the audit with the release)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	client.base, client.token = *url, *token
	var err error
	switch args[0] {
	case "build":
		err = releaseBuild(*release, *subs, *workflows, *catalogDir, *out, stdout)
	case "check":
		var b bundle
		if b, err = readBundle(*file); err == nil {
			err = reportCheck(b, stdout, stdout)
		}
	case "apply", "rollback":
		var b bundle
		if *reason == "" {
			err = errors.New("--reason is required")
		} else if b, err = readBundle(*file); err == nil {
			// Apply refuses a bundle that fails its check, and says why.
			if err = reportCheck(b, stderr, io.Discard); err == nil {
				err = releaseApply(ctx, client, b, args[0], *reason, stdout)
			}
		}
	default:
		fmt.Fprint(stderr, releaseUsage)
		return fmt.Errorf("release: unknown subcommand %q", args[0])
	}
	if err != nil {
		return fmt.Errorf("release %s: %w", args[0], err)
	}
	return nil
}

func releaseBuild(release, subsDir, workflowsFile, catalogDir, out string, stdout io.Writer) error {
	if release == "" || subsDir == "" || workflowsFile == "" || out == "" {
		return errors.New("--release, --subscriptions, --workflows and --out are required")
	}
	b := bundle{Release: release, Catalog: map[string]string{}, Subscriptions: []bundledSubscription{}}
	var src fs.FS = catalog.FS
	if catalogDir != "" {
		src = os.DirFS(catalogDir)
	}
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (p != "catalog.yaml" && path.Ext(p) != ".json") {
			return err
		}
		data, err := fs.ReadFile(src, p)
		b.Catalog[p] = string(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if b.Workflows, err = os.ReadFile(workflowsFile); err != nil {
		return fmt.Errorf("workflows: %w", err)
	}
	specs, err := filepath.Glob(filepath.Join(subsDir, "*", "*.json"))
	if err != nil {
		return fmt.Errorf("subscriptions: %w", err)
	}
	sort.Strings(specs)
	for _, p := range specs {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("subscriptions: %w", err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			return fmt.Errorf("subscription %s: not JSON: %w", p, err)
		}
		b.Subscriptions = append(b.Subscriptions, bundledSubscription{Tenant: filepath.Base(filepath.Dir(p)), Spec: compact.Bytes()})
	}
	if b.Digest, err = digest(b); err != nil {
		return err
	}
	// A bundle that fails its own check is not written: it could never be
	// applied.
	if err := reportCheck(b, stdout, stdout); err != nil {
		return err
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "release %s: %d catalog files, %d subscriptions, %s → %s\n", b.Release, len(b.Catalog), len(b.Subscriptions), b.Digest, out)
	return nil
}

func digest(b bundle) (string, error) {
	b.Digest = ""
	data, err := json.Marshal(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func readBundle(file string) (bundle, error) {
	var b bundle
	if file == "" {
		return b, errors.New("--bundle is required")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("%s: not a bundle: %w", file, err)
	}
	return b, nil
}

// reportCheck writes every problem of b to problems and fails when there
// is one; otherwise it writes a line saying so to ok.
func reportCheck(b bundle, problems, ok io.Writer) error {
	found := checkBundle(b)
	for _, p := range found {
		fmt.Fprintln(problems, "PROBLEM ", p)
	}
	if len(found) > 0 {
		return fmt.Errorf("release %s: %d problems", b.Release, len(found))
	}
	fmt.Fprintf(ok, "release %s: %d subscriptions check against its catalog and workflows\n", b.Release, len(b.Subscriptions))
	return nil
}

// checkBundle validates b's parts against each other (see releaseUsage).
func checkBundle(b bundle) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if b.Release == "" {
		add("the bundle has no release id")
	}
	if d, err := digest(b); err != nil || d != b.Digest {
		add("digest %s does not match the bundle's content (%s): edited after build?", b.Digest, d)
	}
	files := fstest.MapFS{}
	for p, text := range b.Catalog {
		files[p] = &fstest.MapFile{Data: []byte(text)}
	}
	reg, err := registry.Load(files)
	if err != nil {
		add("catalog: %v", err)
		return problems // nothing else can be checked against it
	}
	var wf workflowsView
	if err := json.Unmarshal(b.Workflows, &wf); err != nil {
		add("workflows: %v", err)
	}
	waiting := map[string]bool{} // event types some step waits for
	var definitions []string
	for _, d := range wf.Definitions {
		definitions = append(definitions, d.ID)
		for _, s := range d.Steps {
			if s.WaitFor == "" {
				continue
			}
			waiting[s.WaitFor] = true
			if def, ok := reg.Lookup(s.WaitFor); !ok || def.Kind != registry.KindEvent {
				add("workflow %s step %s: waitFor %s is not an event of this release's catalog", d.ID, s.Name, s.WaitFor)
			}
		}
	}
	seen := map[string]bool{}
	for _, bs := range b.Subscriptions {
		var s specView
		if err := json.Unmarshal(bs.Spec, &s); err != nil {
			add("subscription of %s: not a spec: %v", bs.Tenant, err)
			continue
		}
		where := fmt.Sprintf("subscription %s/%s", bs.Tenant, s.Name)
		if s.Name == "" || bs.Tenant == "" {
			add("%s: a subscription needs a tenant and a name", where)
		}
		if seen[bs.Tenant+"/"+s.Name] {
			add("%s: twice in the bundle", where)
		}
		seen[bs.Tenant+"/"+s.Name] = true
		problems = append(problems, checkSpec(reg, where, s, definitions, waiting)...)
	}
	return problems
}

func checkSpec(reg *registry.Registry, where string, s specView, definitions []string, waiting map[string]bool) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, where+": "+fmt.Sprintf(format, a...)) }
	for _, t := range s.EventTypes {
		if def, ok := reg.Lookup(t); !ok || def.Kind != registry.KindEvent {
			add("event type %s is not an event of this release's catalog", t)
			return problems
		}
	}
	if len(s.EventTypes) == 0 {
		add("no event types")
		return problems
	}
	if _, err := filter.Compile(reg, s.EventTypes, s.Filter); err != nil {
		add("filter: %v", err)
	}
	for i, r := range s.Policy.Rules {
		if _, err := filter.Compile(reg, s.EventTypes, r.When); err != nil {
			add("policy.rules[%d].when: %v", i, err)
		}
	}
	if s.Agent != nil {
		for i, p := range s.Agent.Project {
			if strings.HasPrefix(p, "payload.") {
				if _, err := filter.Compile(reg, s.EventTypes, "has("+p+")"); err != nil {
					add("agent.project[%d] %s: %v", i, p, err)
				}
			}
		}
	}
	switch s.Reaction.Kind {
	case "start-workflow":
		if !slices.Contains(definitions, s.Reaction.DefinitionID) {
			add("reaction start-workflow: definition %q is not among this release's workflows %v", s.Reaction.DefinitionID, definitions)
		}
	case "resume-workflow":
		if !slices.ContainsFunc(s.EventTypes, func(t string) bool { return waiting[t] }) {
			add("reaction resume-workflow: no workflow step of this release waits for %v", s.EventTypes)
		}
	}
	return problems
}

// releaseApply applies (or rolls back) the token tenant's subscriptions
// of b through the workflow's API, naming the release in every reason.
func releaseApply(ctx context.Context, c *workflowClient, b bundle, action, reason string, stdout io.Writer) error {
	tenant, err := tokenTenant(c.token)
	if err != nil {
		return err
	}
	// The workflow lists the token tenant's subscriptions only.
	var existing []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := c.call(ctx, http.MethodGet, "/v1/subscriptions", nil, &existing); err != nil {
		return err
	}
	byName := map[string]string{}
	for _, e := range existing {
		byName[e.Name] = e.ID
	}
	why := "release " + b.Release + ": " + reason
	n := 0
	for _, bs := range b.Subscriptions {
		if bs.Tenant != tenant {
			continue
		}
		var s specView
		_ = json.Unmarshal(bs.Spec, &s) // checked already
		id, ok := byName[s.Name]
		if action == "rollback" {
			if !ok {
				return fmt.Errorf("subscription %s: the tenant has none by that name", s.Name)
			}
			body, _ := json.Marshal(map[string]string{"reason": why})
			var ignored any
			if err := c.call(ctx, http.MethodPost, "/v1/subscriptions/"+id+"/rollback", body, &ignored); err != nil {
				return fmt.Errorf("subscription %s: %w", s.Name, err)
			}
			fmt.Fprintf(stdout, "%s: rolled back (%s)\n", s.Name, id)
			n++
			continue
		}
		var created struct {
			ID      string `json:"id"`
			Version int    `json:"version"`
		}
		p := "/v1/subscriptions"
		if ok {
			p += "/" + id + "/versions"
		}
		if err := c.call(ctx, http.MethodPost, p, bs.Spec, &created); err != nil {
			return fmt.Errorf("subscription %s: %w", s.Name, err)
		}
		body, _ := json.Marshal(map[string]string{"to": "VALIDATING", "reason": why})
		var ignored any
		if err := c.call(ctx, http.MethodPost, fmt.Sprintf("/v1/subscriptions/%s/versions/%d/transitions", created.ID, created.Version), body, &ignored); err != nil {
			return fmt.Errorf("subscription %s version %d: %w", s.Name, created.Version, err)
		}
		fmt.Fprintf(stdout, "%s: version %d of %s submitted for approval\n", s.Name, created.Version, created.ID)
		n++
	}
	fmt.Fprintf(stdout, "release %s: %d subscriptions of tenant %s (%s)\n", b.Release, n, tenant, action)
	return nil
}

// tokenTenant reads the tenant_id claim of a JWT without verifying it: it
// only picks which of the bundle's subscriptions to send; the workflow
// verifies the token and holds every call to that tenant.
func tokenTenant(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("--token is not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		TenantID string `json:"tenant_id"`
	}
	if err != nil || json.Unmarshal(raw, &claims) != nil || claims.TenantID == "" {
		return "", errors.New("--token carries no tenant_id claim")
	}
	return claims.TenantID, nil
}
