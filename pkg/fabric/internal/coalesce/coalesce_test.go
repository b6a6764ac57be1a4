package coalesce_test

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/coalesce"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

var env = fabrictest.EnvFrom(os.Getenv)

// clock is a test's time: windows close when the test says so.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

type rig struct {
	t      *testing.T
	s      *fabrictest.Schema
	ob     *outbox.Outbox
	clock  *clock
	corrID string
}

func newRig(t *testing.T) *rig {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, s: fabrictest.NewSchema(t, env), ob: outbox.New(reg), clock: newClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))}
}

func (r *rig) coalescer(rules ...coalesce.Rule) *coalesce.Coalescer {
	c, err := coalesce.New(r.s.Pool, r.s.Name, r.ob, "test", r.clock.now, rules...)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// event is a status change of request key in tenant, added to rule's
// window in its own transaction (as an inbox handler would).
func (r *rig) add(c *coalesce.Coalescer, rule, tenantID, key, status string) envelope.Envelope {
	r.t.Helper()
	e, err := envelope.New("request.status-changed.v1", tenantID, "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "status": status, "previousStatus": "submitted"})
	if err != nil {
		r.t.Fatal(err)
	}
	if r.corrID == "" {
		r.corrID = e.CorrelationID
	}
	e.CorrelationID = r.corrID
	tx, err := r.s.Pool.Begin(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := c.Add(context.Background(), tx, rule, key, e, map[string]string{"status": status}); err != nil {
		r.t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return e
}

// summaries are the enqueued platform.events-coalesced.v1 envelopes.
func (r *rig) summaries() []envelope.Envelope {
	r.t.Helper()
	rows, err := r.s.Pool.Query(context.Background(), `SELECT body FROM outbox_event WHERE event_type = $1 ORDER BY seq`, coalesce.Type)
	if err != nil {
		r.t.Fatal(err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		r.t.Fatal(err)
	}
	var out []envelope.Envelope
	for _, b := range bodies {
		e, err := envelope.Decode(b, 0)
		if err != nil {
			r.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func summaryOf(t *testing.T, e envelope.Envelope) coalesce.Summary {
	t.Helper()
	var s coalesce.Summary
	if err := json.Unmarshal(e.Payload, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func flush(t *testing.T, c *coalesce.Coalescer) int {
	t.Helper()
	n, err := c.Flush(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDebounceSurvivesARestart: five changes to one request, a restart
// after the third, become one summary when the key has been quiet for the
// window: the count, the last state, every id, caused by the last change.
func TestDebounceSurvivesARestart(t *testing.T) {
	r := newRig(t)
	rule := coalesce.Rule{Name: "request-status", Mode: coalesce.Debounce, Window: 5 * time.Second}
	before := r.coalescer(rule)
	var ids []string
	for _, st := range []string{"in_progress", "waiting", "in_progress"} {
		ids = append(ids, r.add(before, rule.Name, "org-a", "r1", st).ID)
		r.clock.advance(time.Second)
	}
	after := r.coalescer(rule) // the restart: a new process, the same schema
	var last envelope.Envelope
	for _, st := range []string{"waiting", "completed"} {
		last = r.add(after, rule.Name, "org-a", "r1", st)
		ids = append(ids, last.ID)
		r.clock.advance(time.Second)
	}
	// Another tenant's change to a request with the same key is its own
	// window (due 5 s from now, a second after org-a's).
	r.add(after, rule.Name, "org-b", "r1", "waiting")
	r.clock.advance(3 * time.Second) // 4 s after org-a's last change: still open
	if n := flush(t, after); n != 0 {
		t.Fatalf("flushed %d windows before the key went quiet", n)
	}
	r.clock.advance(2 * time.Second)
	if n := flush(t, after); n != 2 {
		t.Fatalf("flushed %d windows, want org-a's and org-b's", n)
	}
	got := r.summaries()
	if len(got) != 2 {
		t.Fatalf("%d summaries, want 2", len(got))
	}
	var a envelope.Envelope
	for _, e := range got {
		if e.TenantID == "org-a" {
			a = e
		}
	}
	s := summaryOf(t, a)
	if s.Count != 5 || s.Mode != coalesce.Debounce || string(s.LastState) != `{"status":"completed"}` || len(s.EventIDs) != 5 || s.EventIDs[4] != last.ID || s.EventIDs[0] != ids[0] {
		t.Errorf("summary = %+v, want 5 changes ending completed, ids in order", s)
	}
	if a.CausationID != last.ID || a.CorrelationID != last.CorrelationID || len(a.CausationChain) == 0 {
		t.Errorf("summary causation %s correlation %s chain %v, want the last change's", a.CausationID, a.CorrelationID, a.CausationChain)
	}
	if n := flush(t, after); n != 0 || len(r.summaries()) != 2 {
		t.Errorf("a second flush emitted %d more", n)
	}
}

// TestDebounceIsBoundedByMaxWait: a key that never goes quiet is still
// reported MaxWait after its first change.
func TestDebounceIsBoundedByMaxWait(t *testing.T) {
	r := newRig(t)
	rule := coalesce.Rule{Name: "busy", Mode: coalesce.Debounce, Window: 5 * time.Second, MaxWait: 12 * time.Second}
	c := r.coalescer(rule)
	for range 4 { // at 0, 4, 8 and 12 s: never quiet for 5 s
		r.add(c, rule.Name, "org-a", "r1", "waiting")
		r.clock.advance(4 * time.Second)
	}
	// At 16 s the last change is 4 s old, so without MaxWait the window
	// would stay open until 17 s; it closed at 12 s.
	if n := flush(t, c); n != 1 || summaryOf(t, r.summaries()[0]).Count != 4 {
		t.Fatalf("16 s after the first of changes every 4 s: flushed %d, want one summary of the four", n)
	}
}

// TestAggregateClosesAtMaxCountOnce: twenty events become one summary at
// the count, however many flushers compete; the twenty-first opens a new
// window.
func TestAggregateClosesAtMaxCountOnce(t *testing.T) {
	r := newRig(t)
	rule := coalesce.Rule{Name: "risk-set", Mode: coalesce.Aggregate, Window: time.Hour, MaxCount: 20}
	c := r.coalescer(rule)
	for range 20 {
		r.add(c, rule.Name, "org-a", "set-1", "in_progress")
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.coalescer(rule).Flush(context.Background(), 100)
			if err != nil {
				t.Error(err)
			}
			total.Add(int64(n))
		}()
	}
	wg.Wait()
	if total.Load() != 1 || len(r.summaries()) != 1 || summaryOf(t, r.summaries()[0]).Count != 20 {
		t.Fatalf("4 competing flushers emitted %d summaries, want one of 20 events", total.Load())
	}
	r.add(c, rule.Name, "org-a", "set-1", "completed")
	if n := flush(t, c); n != 0 {
		t.Errorf("the 21st event flushed at once; it opens a new window, due in an hour")
	}
}

func TestRulesAreChecked(t *testing.T) {
	for _, r := range []coalesce.Rule{{Mode: coalesce.Debounce, Window: time.Second}, {Name: "x", Mode: "sometimes", Window: time.Second}, {Name: "x", Mode: coalesce.Aggregate}} {
		if _, err := coalesce.New(nil, "s", nil, "p", time.Now, r); err == nil {
			t.Errorf("rule %+v accepted", r)
		}
	}
}
