package dlq_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var env = fabrictest.EnvFrom(os.Getenv)

var spec = topology.Consumer{Queue: "test.dlq-ops", Service: "test",
	RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
	Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}

func submitted(t testing.TB, tenantID string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", tenantID, "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": "svc", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "cpf-123.456.789-00", "submittedAt": "2026-11-30T10:00:00Z",
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type rig struct {
	f      *fabrictest.Fabric
	s      *fabrictest.Schema
	ops    *dlq.Ops
	broken atomic.Bool
}

// newRig runs a consumer whose effect is a row in `effect` (no uniqueness:
// duplicates would show) behind the inbox; while broken it fails
// permanently, filling the DLQ.
func newRig(t *testing.T) *rig {
	r := &rig{f: fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}}),
		s: fabrictest.NewSchema(t, env)}
	if _, err := r.s.Pool.Exec(context.Background(), `CREATE TABLE effect (event_id uuid NOT NULL, at timestamptz DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	r.broken.Store(true)
	in := inbox.New(r.s.Pool, r.s.Name, spec.Queue, inbox.Options{})
	// One handler at a time, so messages are handled in queue order: a
	// marker's effect then means everything queued before it was handled.
	r.f.Run(t, spec, in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		if r.broken.Load() {
			return fabric.Permanent(errors.New("downstream rejected the request"))
		}
		_, err := tx.Exec(ctx, `INSERT INTO effect (event_id) VALUES ($1)`, e.ID)
		return err
	}), fabric.ConsumerOptions{Concurrency: 1})
	r.ops = dlq.New(r.f.Conn, r.f.Pub, r.f.Reg, r.s.Pool, r.s.Name)
	return r
}

func (r *rig) effects(t *testing.T) map[string]int {
	rows, err := r.s.Pool.Query(context.Background(), `SELECT event_id::text, count(*) FROM effect GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

func TestListReplayPurgeAreAuditedAndIdempotent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 5; i++ {
		e := submitted(t, "org-a")
		ids = append(ids, e.ID)
		if err := r.f.Pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 10*time.Second, "5 letters in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 5 })

	letters, err := r.ops.List(ctx, spec.Queue, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 5 {
		t.Fatalf("List = %d letters, want 5", len(letters))
	}
	// Quorum queues apply returns asynchronously: the depth comes back shortly.
	fabrictest.Eventually(t, 5*time.Second, "listed letters back in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 5 })
	l := letters[0]
	if l.Reason != wire.ReasonPermanent || l.ErrorClass != "permanent" || l.Consumer != spec.Queue || l.TenantID != "org-a" || l.Attempts != 1 {
		t.Errorf("letter = %+v", l)
	}
	if strings.Contains(string(l.Payload), "cpf-123") || !strings.Contains(string(l.Payload), `"citizenId":"***"`) {
		t.Errorf("payload not masked: %s", l.Payload)
	}

	// Refusals: no operator, no reason, no filter.
	for _, req := range []dlq.Request{
		{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Reason: "fix"},
		{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Operator: "ana"},
		{Queue: spec.Queue, Operator: "ana", Reason: "fix"},
	} {
		if _, err := r.ops.Replay(ctx, req); err == nil {
			t.Errorf("Replay(%+v) = nil error", req)
		}
	}

	dry, err := r.ops.Replay(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Operator: "ana", Reason: "downstream fixed", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Matched) != 5 || dry.Succeeded != 0 {
		t.Fatalf("dry run = %+v; want 5 matched, nothing moved", dry)
	}
	fabrictest.Eventually(t, 5*time.Second, "dry run left every letter", func() bool { return r.f.Depth(t, spec.DLQ()) == 5 })

	r.broken.Store(false)
	one, err := r.ops.Replay(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{IDs: []string{ids[0]}}, Operator: "ana", Reason: "one first"})
	if err != nil || one.Succeeded != 1 {
		t.Fatalf("replay one = %+v, %v", one, err)
	}
	fabrictest.Eventually(t, 10*time.Second, "replayed effect", func() bool { return r.effects(t)[ids[0]] == 1 })

	// Duplicate the remaining letters in the DLQ (as if dead-lettered twice)
	// plus a copy of the one already replayed: replaying all must still
	// leave exactly one effect per event.
	fabrictest.Eventually(t, 5*time.Second, "4 letters left", func() bool { return r.f.Depth(t, spec.DLQ()) == 4 })
	dups := r.f.Drain(t, spec.DLQ())
	if len(dups) != 4 {
		t.Fatalf("DLQ holds %d, want 4", len(dups))
	}
	for _, d := range append(dups, dups...) {
		p, err := r.f.Pub.Send(ctx, broker.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: d.Body, MessageID: d.MessageId, Type: d.Type, Headers: d.Headers})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var progress []int
	all, err := r.ops.Replay(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Operator: "ana", Reason: "downstream fixed",
		Progress: func(done, total int) { progress = append(progress, done) }})
	if err != nil || all.Succeeded != 8 {
		t.Fatalf("replay all = %+v, %v; want 8 replayed", all, err)
	}
	if len(progress) != 8 || progress[7] != 8 {
		t.Errorf("progress calls = %v", progress)
	}
	// Every replayed copy is in the queue now (each was confirmed before
	// Replay returned). A marker published behind them is handled after
	// all of them, so its effect means no copy is left to add a second one.
	marker := submitted(t, "org-a")
	if err := r.f.Pub.Publish(ctx, marker); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "the marker's effect, behind every replayed copy", func() bool { return r.effects(t)[marker.ID] == 1 })
	effects := r.effects(t)
	delete(effects, marker.ID)
	for _, id := range ids {
		if n := effects[id]; n != 1 {
			t.Errorf("event %s has %d effects, want 1", id, n)
		}
	}
	if len(effects) != len(ids) {
		t.Errorf("effects for %d events besides the marker, want %d", len(effects), len(ids))
	}

	// Purge, filtered and audited.
	r.broken.Store(true)
	stray := submitted(t, "org-b")
	if err := r.f.Pub.Publish(ctx, stray); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "stray letter", func() bool { return r.f.Depth(t, spec.DLQ()) == 1 })
	pur, err := r.ops.Purge(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{Tenant: "org-b"}, Operator: "ana", Reason: "test data"})
	if err != nil || pur.Succeeded != 1 {
		t.Fatalf("purge = %+v, %v", pur, err)
	}
	fabrictest.Eventually(t, 5*time.Second, "empty DLQ after purge", func() bool { return r.f.Depth(t, spec.DLQ()) == 0 })

	audit, err := r.ops.Audit(ctx, spec.Queue, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
		if a.Operator != "ana" || a.Reason == "" {
			t.Errorf("audit row without who/why: %+v", a)
		}
	}
	if got := strings.Join(actions, ","); got != "purge,replay,replay,replay-dry-run" {
		t.Errorf("audit actions (newest first) = %s", got)
	}
	if audit[2].MessageIDs[0] != ids[0] {
		t.Errorf("audit ids = %v, want [%s]", audit[2].MessageIDs, ids[0])
	}
}

func TestHTTPHandlerRequiresOperatorAndScopesTenant(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, tenantID := range []string{"org-a", "org-b"} {
		if err := r.f.Pub.Publish(ctx, submitted(t, tenantID)); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 10*time.Second, "2 letters", func() bool { return r.f.Depth(t, spec.DLQ()) == 2 })
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(ctx, keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	v := auth.NewVerifier(set, auth.DevIssuer)
	srv := httptest.NewServer(v.Require(auth.RoleOperator)(dlq.Handler(r.ops, []string{spec.Queue})))
	defer srv.Close()
	token := func(roles ...string) string {
		tok, err := keys.Mint(auth.Claims{Subject: "op-1", TenantID: "org-a", Roles: roles}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	call := func(method, path, tok, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	if resp, _ := call("GET", dlq.PathPrefix+spec.Queue, token(auth.RoleAttendant), ""); resp.StatusCode != 403 {
		t.Errorf("attendant list = %d, want 403", resp.StatusCode)
	}
	if resp, _ := call("GET", dlq.PathPrefix+"other.queue", token(auth.RoleOperator), ""); resp.StatusCode != 404 {
		t.Errorf("foreign queue = %d, want 404", resp.StatusCode)
	}
	resp, body := call("GET", dlq.PathPrefix+spec.Queue, token(auth.RoleOperator), "")
	var letters []dlq.Letter
	if err := json.Unmarshal(body, &letters); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list = %d %s", resp.StatusCode, body)
	}
	if len(letters) != 1 || letters[0].TenantID != "org-a" {
		t.Fatalf("operator of org-a sees %+v, want only org-a's letter", letters)
	}
	if resp, _ := call("POST", dlq.PathPrefix+spec.Queue+"/replay", token(auth.RoleOperator), `{"filter":{"all":true}}`); resp.StatusCode != 422 {
		t.Errorf("replay without reason = %d, want 422", resp.StatusCode)
	}
	if resp, _ := call("POST", dlq.PathPrefix+spec.Queue+"/replay", token(auth.RoleOperator), ""); resp.StatusCode != 415 {
		t.Errorf("replay without a JSON body = %d, want 415", resp.StatusCode)
	}
	// No filter does not mean every letter: that takes "all": true.
	if resp, body := call("POST", dlq.PathPrefix+spec.Queue+"/replay", token(auth.RoleOperator), `{"reason":"fixed"}`); resp.StatusCode != 400 || !strings.Contains(string(body), "filter") {
		t.Errorf("replay without a filter = %d %s, want 400 naming the filter", resp.StatusCode, body)
	}
	var rep dlq.Report
	// Streamed (the console's way): progress lines, then the result the
	// call would have answered, refusals included.
	streamed := func(body string) []dlq.StreamLine {
		req, _ := http.NewRequest("POST", srv.URL+dlq.PathPrefix+spec.Queue+"/replay", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", dlq.StreamType)
		req.Header.Set("Authorization", "Bearer "+token(auth.RoleOperator))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != dlq.StreamType {
			t.Fatalf("streamed replay = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var lines []dlq.StreamLine
		dec := json.NewDecoder(resp.Body)
		for {
			var l dlq.StreamLine
			if err := dec.Decode(&l); errors.Is(err, io.EOF) {
				return lines
			} else if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
	}
	lines := streamed(`{"filter":{"all":true},"reason":"look first","dryRun":true}`)
	if len(lines) < 2 || lines[0].Progress == nil || lines[0].Progress.Total < 1 || !strings.Contains(lines[0].Progress.Line, "letters examined") {
		t.Fatalf("streamed dry run = %+v, want progress lines first", lines)
	}
	last := lines[len(lines)-1].Result
	if err := json.Unmarshal(last.Body, &rep); err != nil || last.Status != 200 || !rep.DryRun || len(rep.Matched) != 1 {
		t.Fatalf("streamed dry run result = %d %s", last.Status, last.Body)
	}
	if lines := streamed(`{"filter":{"all":true}}`); lines[len(lines)-1].Result == nil || lines[len(lines)-1].Result.Status != 422 {
		t.Errorf("streamed replay without reason = %+v, want a 422 result line", lines)
	}
	r.broken.Store(false)
	resp, body = call("POST", dlq.PathPrefix+spec.Queue+"/replay", token(auth.RoleOperator), `{"filter":{"all":true},"reason":"fixed"}`)
	if err := json.Unmarshal(body, &rep); err != nil || resp.StatusCode != 200 || rep.Succeeded != 1 {
		t.Fatalf("replay = %d %s", resp.StatusCode, body)
	}
	fabrictest.Eventually(t, 5*time.Second, "org-b's letter alone left", func() bool { return r.f.Depth(t, spec.DLQ()) == 1 })

	// A type the catalog marks replayable: false: 422 naming it, and the
	// letter stays.
	send, err := envelope.New("communication.send.v1", "org-a", "test", map[string]any{"channel": "sms", "recipientRef": "c-1", "template": "t"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := send.Encode()
	p, err := r.f.Pub.Send(ctx, broker.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: raw, MessageID: send.ID, Type: send.Type,
		Headers: amqp.Table{wire.HeaderTenant: "org-a", wire.HeaderReason: wire.ReasonPermanent}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 5*time.Second, "the send letter in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 2 })
	resp, body = call("POST", dlq.PathPrefix+spec.Queue+"/replay", token(auth.RoleOperator), `{"filter":{"all":true},"reason":"fixed"}`)
	if resp.StatusCode != 422 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "communication.send.v1") {
		t.Fatalf("replay of a non-replayable letter = %d %s, want a 422 problem naming its type", resp.StatusCode, body)
	}
	fabrictest.Eventually(t, 5*time.Second, "both letters still in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 2 })
}

// TestReplayRefusesTypesThatAreNotReplayable: a letter whose type the
// catalog marks replayable: false (communication.send.v1 would message the
// citizen again) stays in the DLQ with an error naming its type, the rest
// of the walk is replayed, the audit row says what was refused, and purge
// still removes the letter.
func TestReplayRefusesTypesThatAreNotReplayable(t *testing.T) {
	r := newRig(t)
	r.broken.Store(false)
	ctx := context.Background()
	send, err := envelope.New("communication.send.v1", "org-a", "test", map[string]any{
		"channel": "sms", "recipientRef": "citizen-1", "template": "reminder"})
	if err != nil {
		t.Fatal(err)
	}
	replayable := submitted(t, "org-a")
	for _, e := range []envelope.Envelope{send, replayable} {
		body, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		p, err := r.f.Pub.Send(ctx, broker.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: body, MessageID: e.ID, Type: e.Type,
			Headers: amqp.Table{wire.HeaderTenant: "org-a", wire.HeaderReason: wire.ReasonPermanent, wire.HeaderConsumer: spec.Queue}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fabrictest.Eventually(t, 5*time.Second, "2 letters in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 2 })

	req := dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Operator: "ana", Reason: "downstream fixed"}
	dryReq := req
	dryReq.DryRun = true
	dry, err := r.ops.Replay(ctx, dryReq)
	if !errors.Is(err, dlq.ErrNotReplayable) || len(dry.Refused) != 1 || len(dry.Matched) != 1 {
		t.Fatalf("dry run = %+v, %v; want %s refused up front and ErrNotReplayable", dry, err, send.ID)
	}
	rep, err := r.ops.Replay(ctx, req)
	if !errors.Is(err, dlq.ErrNotReplayable) || !strings.Contains(err.Error(), "communication.send.v1") {
		t.Fatalf("Replay error = %v, want ErrNotReplayable naming communication.send.v1", err)
	}
	if rep.Succeeded != 1 || len(rep.Refused) != 1 || rep.Refused[0] != send.ID || len(rep.Matched) != 1 || rep.Matched[0] != replayable.ID {
		t.Fatalf("report = %+v, want %s replayed and %s refused", rep, replayable.ID, send.ID)
	}
	fabrictest.Eventually(t, 10*time.Second, "the replayable letter's effect", func() bool { return r.effects(t)[replayable.ID] == 1 })
	fabrictest.Eventually(t, 5*time.Second, "the refused letter back in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 1 })
	left, err := r.ops.List(ctx, spec.Queue, 0)
	if err != nil || len(left) != 1 || left[0].MessageID != send.ID {
		t.Fatalf("DLQ after replay = %+v, %v; want only %s", left, err, send.ID)
	}

	audit, err := r.ops.Audit(ctx, spec.Queue, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a := audit[0]; a.Action != "replay" || !strings.Contains(a.Result, "refused") || !strings.Contains(a.Result, "communication.send.v1") ||
		!slices.Contains(a.MessageIDs, send.ID) {
		t.Errorf("audit row = %+v, want the refusal recorded", a)
	}

	pur, err := r.ops.Purge(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{IDs: []string{send.ID}}, Operator: "ana", Reason: "not to be sent twice"})
	if err != nil || pur.Succeeded != 1 {
		t.Fatalf("purge = %+v, %v; want the refused letter purged", pur, err)
	}
	fabrictest.Eventually(t, 5*time.Second, "empty DLQ after purge", func() bool { return r.f.Depth(t, spec.DLQ()) == 0 })
}

// operatorAPI serves the DLQ handler as the host mounts it (behind the
// operator role) and mints tokens for it.
type operatorAPI struct {
	t    *testing.T
	url  string
	keys *auth.DevKeys
}

func newOperatorAPI(t *testing.T, ops *dlq.Ops) *operatorAPI {
	keys, err := auth.LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(context.Background(), keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	v := auth.NewVerifier(set, auth.DevIssuer)
	srv := httptest.NewServer(v.Require(auth.RoleOperator)(dlq.Handler(ops, []string{spec.Queue})))
	t.Cleanup(srv.Close)
	return &operatorAPI{t: t, url: srv.URL, keys: keys}
}

func (a *operatorAPI) token(sub, tenantID string, roles ...string) string {
	tok, err := a.keys.Mint(auth.Claims{Subject: sub, TenantID: tenantID, Roles: roles}, time.Hour)
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

// call sends a request (no Authorization header when tok is empty) and
// decodes a JSON answer into out when it is not nil.
func (a *operatorAPI) call(method, path, tok, body string, out any) *http.Response {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s = %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp
}

// TestHTTPOperatorsSeeAndActOnTheirTenantOnly: with letters of org-a,
// org-b and one whose header and envelope disagree in the DLQ, an
// operator of org-a lists, shows, replays and purges org-a's letters
// only, sees only the audit rows of org-a's operations, and every audit
// row names the token's subject. Tokens that are missing or invalid get
// 401, other roles 403, all as RFC 9457 problems.
func TestHTTPOperatorsSeeAndActOnTheirTenantOnly(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	var a, b []string
	for _, tenantID := range []string{"org-a", "org-a", "org-b"} {
		e := submitted(t, tenantID)
		if tenantID == "org-a" {
			a = append(a, e.ID)
		} else {
			b = append(b, e.ID)
		}
		if err := r.f.Pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// org-b's envelope under org-a's header: the consumer dead-letters
	// such a message as a tenant mismatch; neither tenant may touch it.
	forged := submitted(t, "org-b")
	raw, _ := forged.Encode()
	p, err := r.f.Pub.Send(ctx, broker.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: raw, MessageID: forged.ID, Type: forged.Type,
		Headers: amqp.Table{wire.HeaderTenant: "org-a", wire.HeaderReason: wire.ReasonTenantMismatch}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "4 letters in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 4 })
	// A platform-wide operation (fabricctl without --tenant): audited with
	// no tenant, so no tenant's operator sees it.
	if _, err := r.ops.Replay(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Operator: "platform-ops", Reason: "look", DryRun: true}); err != nil {
		t.Fatal(err)
	}

	api := newOperatorAPI(t, r.ops)
	opA, opB := api.token("op-a", "org-a", auth.RoleOperator), api.token("op-b", "org-b", auth.RoleOperator)
	list := dlq.PathPrefix + spec.Queue

	t.Run("authentication and role", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path, token string
			want                      int
		}{
			{"no token", "GET", list, "", 401},
			{"not a JWT", "GET", list, "not-a-token", 401},
			{"no token, audit", "GET", dlq.PathPrefix + "audit", "", 401},
			{"attendant", "GET", list, api.token("att", "org-a", auth.RoleAttendant), 403},
			{"citizen replays", "POST", list + "/replay", api.token("cit", "org-a", auth.RoleCitizen), 403},
			{"attendant reads the audit", "GET", dlq.PathPrefix + "audit", api.token("att", "org-a", auth.RoleAttendant), 403},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var pd problem.Details
				resp := api.call(tc.method, tc.path, tc.token, `{"filter":{"all":true},"reason":"x"}`, &pd)
				if resp.StatusCode != tc.want || pd.Status != tc.want || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("= %d %s %+v; want a %d problem", resp.StatusCode, resp.Header.Get("Content-Type"), pd, tc.want)
				}
			})
		}
	})

	t.Run("listing", func(t *testing.T) {
		for _, tc := range []struct {
			token string
			want  []string
		}{{opA, a}, {opB, b}} {
			var letters []dlq.Letter
			if resp := api.call("GET", list, tc.token, "", &letters); resp.StatusCode != 200 {
				t.Fatalf("list = %d", resp.StatusCode)
			}
			var got []string
			for _, l := range letters {
				got = append(got, l.MessageID)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("listed %v, want %v (never another tenant's, never the forged one)", got, want)
			}
		}
		if resp := api.call("GET", list+"/letters/"+b[0], opA, "", nil); resp.StatusCode != 404 {
			t.Errorf("org-a shows org-b's letter: %d, want 404", resp.StatusCode)
		}
		if resp := api.call("GET", list+"/letters/"+forged.ID, opA, "", nil); resp.StatusCode != 404 {
			t.Errorf("org-a shows the forged letter: %d, want 404", resp.StatusCode)
		}
	})

	r.broken.Store(false)
	t.Run("acting on another tenant's letter", func(t *testing.T) {
		for _, path := range []string{list + "/replay", list + "/purge"} {
			for _, id := range []string{b[0], forged.ID} {
				var pd problem.Details
				resp := api.call("POST", path, opA, `{"filter":{"ids":["`+id+`"]},"reason":"mine now"}`, &pd)
				if resp.StatusCode != 404 || !strings.Contains(pd.Detail, id) {
					t.Errorf("POST %s of %s by org-a = %d %+v, want 404 naming it", path, id, resp.StatusCode, pd)
				}
			}
		}
		// A tenant alone narrows nothing (it becomes the operator's own):
		// not a filter, lest it select every letter without "all": true.
		var pd problem.Details
		if resp := api.call("POST", list+"/purge", opA, `{"filter":{"tenant":"org-b"},"reason":"only a tenant"}`, &pd); resp.StatusCode != 400 {
			t.Errorf("purge with only a tenant as filter = %d %+v, want 400", resp.StatusCode, pd)
		}
		// A tenant in the body is overridden by the token's.
		var rep dlq.Report
		api.call("POST", list+"/purge", opA, `{"filter":{"tenant":"org-b","all":true},"reason":"filter says org-b","dryRun":true}`, &rep)
		if got := slices.Sorted(slices.Values(rep.Matched)); !slices.Equal(got, slices.Sorted(slices.Values(a))) || rep.Succeeded != 0 {
			t.Errorf("org-a's dry-run purge with tenant org-b in its filter = %+v, want org-a's letters %v only", rep, a)
		}
		fabrictest.Eventually(t, 5*time.Second, "all 4 letters still in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 4 })
	})

	t.Run("replaying its own", func(t *testing.T) {
		var rep dlq.Report
		if resp := api.call("POST", list+"/replay", opA, `{"filter":{"all":true},"reason":"downstream fixed"}`, &rep); resp.StatusCode != 200 || rep.Succeeded != 2 {
			t.Fatalf("replay all by org-a = %d %+v, want org-a's 2 letters", resp.StatusCode, rep)
		}
		fabrictest.Eventually(t, 10*time.Second, "org-a's effects", func() bool { e := r.effects(t); return e[a[0]] == 1 && e[a[1]] == 1 })
		fabrictest.Eventually(t, 5*time.Second, "org-b's and the forged letter left", func() bool { return r.f.Depth(t, spec.DLQ()) == 2 })
		if r.effects(t)[b[0]] != 0 {
			t.Error("org-b's letter was replayed by org-a")
		}
	})

	t.Run("audit", func(t *testing.T) {
		var dry dlq.Report
		api.call("POST", list+"/replay", opB, `{"filter":{"all":true},"reason":"check","dryRun":true}`, &dry)
		for _, tc := range []struct {
			token, tenant, subject string
			rows                   int
		}{
			{opA, "org-a", "op-a", 6}, // 4 refused attempts, the dry-run purge, the replay
			{opB, "org-b", "op-b", 1},
		} {
			var entries []dlq.AuditEntry
			if resp := api.call("GET", dlq.PathPrefix+"audit", tc.token, "", &entries); resp.StatusCode != 200 {
				t.Fatalf("audit = %d", resp.StatusCode)
			}
			if len(entries) != tc.rows {
				t.Errorf("%s sees %d audit rows, want %d: %+v", tc.tenant, len(entries), tc.rows, entries)
			}
			for _, e := range entries {
				if e.TenantID != tc.tenant || e.Operator != tc.subject {
					t.Errorf("%s sees audit row %+v; want only its tenant's, by the token's subject %s", tc.tenant, e, tc.subject)
				}
				for _, id := range e.MessageIDs {
					if slices.Contains(b, id) && tc.tenant != "org-b" || id == forged.ID {
						t.Errorf("audit row %d visible to %s names letter %s", e.ID, tc.tenant, id)
					}
				}
			}
		}
		all, err := r.ops.Audit(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 8 || all[len(all)-1].Operator != "platform-ops" || all[len(all)-1].TenantID != "" {
			t.Errorf("platform audit = %+v; want 8 rows, the first platform-wide", all)
		}
	})
}
