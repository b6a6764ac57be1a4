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
	"github.com/agora-platform/agora/pkg/fabric/dlq"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
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
	if l.Reason != fabric.ReasonPermanent || l.ErrorClass != "permanent" || l.Consumer != spec.Queue || l.TenantID != "org-a" || l.Attempts != 1 {
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
		p, err := r.f.Pub.Send(ctx, fabric.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: d.Body, MessageID: d.MessageId, Type: d.Type, Headers: d.Headers})
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
	if resp, _ := call("GET", "/admin/dlq/"+spec.Queue, token(auth.RoleAttendant), ""); resp.StatusCode != 403 {
		t.Errorf("attendant list = %d, want 403", resp.StatusCode)
	}
	if resp, _ := call("GET", "/admin/dlq/other.queue", token(auth.RoleOperator), ""); resp.StatusCode != 404 {
		t.Errorf("foreign queue = %d, want 404", resp.StatusCode)
	}
	resp, body := call("GET", "/admin/dlq/"+spec.Queue, token(auth.RoleOperator), "")
	var letters []dlq.Letter
	if err := json.Unmarshal(body, &letters); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list = %d %s", resp.StatusCode, body)
	}
	if len(letters) != 1 || letters[0].TenantID != "org-a" {
		t.Fatalf("operator of org-a sees %+v, want only org-a's letter", letters)
	}
	if resp, _ := call("POST", "/admin/dlq/"+spec.Queue+"/replay", token(auth.RoleOperator), `{"filter":{"all":true}}`); resp.StatusCode != 422 {
		t.Errorf("replay without reason = %d, want 422", resp.StatusCode)
	}
	r.broken.Store(false)
	resp, body = call("POST", "/admin/dlq/"+spec.Queue+"/replay", token(auth.RoleOperator), `{"filter":{"all":true},"reason":"fixed"}`)
	var rep dlq.Report
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
	p, err := r.f.Pub.Send(ctx, fabric.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: raw, MessageID: send.ID, Type: send.Type,
		Headers: amqp.Table{fabric.HeaderTenant: "org-a", fabric.HeaderReason: fabric.ReasonPermanent}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 5*time.Second, "the send letter in the DLQ", func() bool { return r.f.Depth(t, spec.DLQ()) == 2 })
	resp, body = call("POST", "/admin/dlq/"+spec.Queue+"/replay", token(auth.RoleOperator), `{"filter":{"all":true},"reason":"fixed"}`)
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
		p, err := r.f.Pub.Send(ctx, fabric.Message{Exchange: "", RoutingKey: spec.DLQ(), Body: body, MessageID: e.ID, Type: e.Type,
			Headers: amqp.Table{fabric.HeaderTenant: "org-a", fabric.HeaderReason: fabric.ReasonPermanent, fabric.HeaderConsumer: spec.Queue}})
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
