package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var env = fabrictest.EnvFrom(os.Getenv)

var spec = topology.Consumer{Queue: "test.outbox", Service: "test",
	RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
	Bindings:   []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.#"}}}

func desc() topology.Description {
	return topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}}
}

func submitted(t testing.TB, seq int, aggregate string) envelope.Envelope {
	t.Helper()
	e, err := envelope.New("request.submitted.v1", "org-a", "test", map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": aggregate, "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z", "fieldCount": seq,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// enqueue commits (or rolls back) one transaction holding items.
func enqueue(t testing.TB, s *fabrictest.Schema, ob *outbox.Outbox, commit bool, items ...outbox.Item) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := ob.Enqueue(ctx, tx, items...); err != nil {
			return err
		}
		if !commit {
			return errRollback
		}
		return nil
	})
	if err != nil && !errors.Is(err, errRollback) {
		t.Fatalf("enqueue: %v", err)
	}
}

var errRollback = errors.New("rollback on purpose")

// relayPool returns a pool of the relay's own on s: after each connection
// the relay gives back, which is after each of its looks (its listener
// keeps its connection), looked receives, if it has room.
func relayPool(t testing.TB, s *fabrictest.Schema, looked chan<- struct{}) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = s.Name
	cfg.AfterRelease = func(*pgx.Conn) bool {
		select {
		case looked <- struct{}{}:
		default:
		}
		return true
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// await waits for a signal on c.
func await(t testing.TB, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out after 5s waiting for %s", what)
	}
}

// awaitListening waits until a session LISTENs on s's outbox channel: idle
// after the LISTEN, which has therefore committed, so every notification
// from now on reaches it. PostgreSQL has no event for it; pg_stat_activity
// is where it shows.
func awaitListening(t testing.TB, s *fabrictest.Schema) {
	t.Helper()
	listen := "LISTEN " + pgx.Identifier{wire.OutboxChannel(s.Name)}.Sanitize()
	fabrictest.Eventually(t, 5*time.Second, "a session listening on the outbox channel", func() bool {
		var ok bool
		if err := s.Pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE state = 'idle' AND query = $1)`, listen).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	})
}

func runRelay(t testing.TB, r *relay.Relay) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestCommittedRowsArePublishedRolledBackNever(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ob := outbox.New(f.Reg)
	// A long poll interval: only NOTIFY can make this fast.
	looked := make(chan struct{}, 1)
	relay := relay.New(relayPool(t, s, looked), s.Name, f.Pub, relay.Options{PollInterval: time.Minute, Retention: -1})
	runRelay(t, relay)
	// Once its first look is over and its listener subscribed, only a
	// notification brings the relay back within the minute.
	await(t, looked, "the relay's first look")
	awaitListening(t, s)

	kept := submitted(t, 1, "agg")
	dropped := submitted(t, 2, "agg")
	start := time.Now()
	enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r1"}, Envelope: kept})
	enqueue(t, s, ob, false, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r2"}, Envelope: dropped})
	var got []string
	fabrictest.Eventually(t, 5*time.Second, "the committed event on the queue", func() bool {
		for _, d := range f.Drain(t, spec.Queue) {
			got = append(got, d.MessageId)
			// The row's stored properties are sent as properties, not
			// as headers: the relay sends what the publisher would.
			if d.CorrelationId != kept.CorrelationID || d.Type != kept.Type || d.Headers["amqp:correlation-id"] != nil {
				t.Errorf("relayed correlation_id %q, type %q, headers %v; want %q, %q and no stored-property header",
					d.CorrelationId, d.Type, d.Headers, kept.CorrelationID, kept.Type)
			}
		}
		return len(got) >= 1
	})
	latency := time.Since(start)
	// A marker committed on the rolled-back row's aggregate after it: the
	// relay publishes an aggregate's rows in order, so had the rolled-back
	// row been stored it would be on the queue before the marker.
	marker := submitted(t, 3, "agg")
	enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r2"}, Envelope: marker})
	fabrictest.Eventually(t, 5*time.Second, "the marker on the queue", func() bool {
		for _, d := range f.Drain(t, spec.Queue) {
			got = append(got, d.MessageId)
		}
		return slices.Contains(got, marker.ID)
	})
	if len(got) != 2 || got[0] != kept.ID {
		t.Fatalf("published %v, want only %s and the marker %s", got, kept.ID, marker.ID)
	}
	if latency > 2*time.Second {
		t.Errorf("commit→queue took %s with a 1 min poll: NOTIFY did not wake the relay", latency)
	}
	if n, err := relay.Pending(context.Background()); err != nil || n != 0 {
		t.Errorf("pending = %d (%v), want 0", n, err)
	}
	var published *time.Time
	var attempts int
	if err := s.Pool.QueryRow(context.Background(), "SELECT published_at, publication_attempts FROM outbox_event WHERE id = $1", kept.ID).Scan(&published, &attempts); err != nil {
		t.Fatal(err)
	}
	if published == nil || attempts != 1 {
		t.Errorf("row: published_at %v attempts %d, want set and 1", published, attempts)
	}
}

// TestWakeReplacesNotify: an Outbox with WithWake queues no NOTIFY, and
// the relay it wakes still publishes a row whose transaction commits well
// after Enqueue returned, although its poll interval is a minute. The
// listener proves the absence: notifications arrive in commit order, so a
// NOTIFY from the enqueuing transaction would come before a marker
// notified after it committed.
func TestWakeReplacesNotify(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ctx := context.Background()
	looked := make(chan struct{}, 1)
	relay := relay.New(relayPool(t, s, looked), s.Name, f.Pub, relay.Options{PollInterval: time.Minute, Retention: -1})
	ob := outbox.New(f.Reg).WithWake(relay.Expect)
	listener, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	channel := pgx.Identifier{wire.OutboxChannel(s.Name)}.Sanitize()
	if _, err := listener.Exec(ctx, "LISTEN "+channel); err != nil {
		t.Fatal(err)
	}
	defer listener.Exec(context.WithoutCancel(ctx), "UNLISTEN *")
	runRelay(t, relay)
	// After its first look the relay sleeps for the minute: its next look
	// is one that Expect asked for.
	await(t, looked, "the relay's first look")

	e := submitted(t, 1, "agg")
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r1"}, Envelope: e}); err != nil {
		t.Fatal(err)
	}
	// The relay looks, finds nothing, and must look again after the commit.
	await(t, looked, "the relay looking while the row is uncommitted")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	var got []string
	fabrictest.Eventually(t, 5*time.Second, "the row on the queue", func() bool {
		for _, d := range f.Drain(t, spec.Queue) {
			got = append(got, d.MessageId)
		}
		return len(got) >= 1
	})
	if latency := time.Since(committed); len(got) != 1 || got[0] != e.ID || latency > time.Second {
		t.Fatalf("published %v %s after the commit, want %s alone and within a second", got, latency, e.ID)
	}
	if _, err := s.Pool.Exec(ctx, "SELECT pg_notify($1, 'marker')", wire.OutboxChannel(s.Name)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.Conn().WaitForNotification(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != "marker" {
		t.Errorf("first notification %q, want the marker: Enqueue notified", n.Payload)
	}
}

func TestEnqueueRejectsInvalidEnvelopes(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	f := fabrictest.NewFabric(t, env, desc())
	ob := outbox.New(f.Reg)
	bad := submitted(t, 1, "x")
	bad.Payload = []byte(`{"requestId":"nope"}`)
	err := pgx.BeginFunc(context.Background(), s.Pool, func(tx pgx.Tx) error {
		return ob.Enqueue(context.Background(), tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r"}, Envelope: bad})
	})
	if err == nil {
		t.Fatal("Enqueue of a schema-invalid envelope = nil error")
	}
}

// TestEnqueueNamesActorAndEntity: every producer's events say who acted
// and what about without the producer saying so: the entity is the item's
// aggregate; the actor is the context's (the HTTP edge puts the token's
// subject there), else the producing service; a producer's own wins.
func TestEnqueueNamesActorAndEntity(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	f := fabrictest.NewFabric(t, env, desc())
	ob := outbox.New(f.Reg)
	user := envelope.WithActor(context.Background(), envelope.Ref{Type: "USER", ID: "citizen-7"})
	agent := envelope.Ref{Type: "AGENT", ID: "subscription/s-1"}
	tests := []struct {
		name      string
		ctx       context.Context
		own       *envelope.Ref
		wantActor envelope.Ref
	}{
		{"the producing service, when nobody else acted", context.Background(), nil, envelope.Ref{Type: "SYSTEM", ID: "test"}},
		{"the context's user", user, nil, envelope.Ref{Type: "USER", ID: "citizen-7"}},
		{"the producer's own", user, &agent, agent},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := submitted(t, i, "r-"+strconv.Itoa(i))
			e.Actor = tc.own
			err := pgx.BeginFunc(context.Background(), s.Pool, func(tx pgx.Tx) error {
				return ob.Enqueue(tc.ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r-" + strconv.Itoa(i)}, Envelope: e})
			})
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			if err := s.Pool.QueryRow(context.Background(), "SELECT body FROM outbox_event WHERE id = $1", e.ID).Scan(&body); err != nil {
				t.Fatal(err)
			}
			got, err := envelope.Decode(body, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Actor == nil || *got.Actor != tc.wantActor {
				t.Errorf("actor = %v, want %v", got.Actor, tc.wantActor)
			}
			if want := (envelope.Ref{Type: "request", ID: "r-" + strconv.Itoa(i)}); got.Entity == nil || *got.Entity != want {
				t.Errorf("entity = %v, want %v", got.Entity, want)
			}
		})
	}
}

func TestUnroutableRowsStayPendingWithTheirError(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ob := outbox.New(f.Reg)
	e, _ := envelope.New("citizen.updated.v1", "org-a", "test", map[string]any{"citizenId": "c"})
	enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "citizen", ID: "c"}, Envelope: e})
	relay := relay.New(s.Pool, s.Name, f.Pub, relay.Options{})
	res, err := relay.RelayOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || res.Published != 0 {
		t.Fatalf("RelayOnce = %+v, want 1 failed", res)
	}
	var lastErr string
	var attempts int
	var next *time.Time
	if err := s.Pool.QueryRow(context.Background(), "SELECT last_error, publication_attempts, next_attempt_at FROM outbox_event").Scan(&lastErr, &attempts, &next); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || next == nil || !strings.Contains(lastErr, "unroutable") {
		t.Fatalf("row after unroutable publish: attempts %d next %v err %q", attempts, next, lastErr)
	}
}

// TestBatchInFlightHoldsBackItsAggregates: while a full batch waits for
// its confirms, the relay claims and sends the next one; a row whose
// aggregate has a row in the batch in flight must wait for that batch's
// outcome. Here that row failed (unroutable), so the aggregate's next row,
// first of the next batch, stays pending while every other row goes out.
func TestBatchInFlightHoldsBackItsAggregates(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ob := outbox.New(f.Reg)
	poison := outbox.Aggregate{Type: "request", ID: "poison"}
	unroutable, _ := envelope.New("citizen.updated.v1", "org-a", "test", map[string]any{"citizenId": "c"})
	held := submitted(t, 0, "poison")
	var items []outbox.Item
	for i := range 30 {
		switch i {
		case 9: // the first batch's last row
			items = append(items, outbox.Item{Aggregate: poison, Envelope: unroutable})
		case 10: // the next batch's first
			items = append(items, outbox.Item{Aggregate: poison, Envelope: held})
		default:
			e := submitted(t, i, "filler")
			items = append(items, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e})
		}
	}
	enqueue(t, s, ob, true, items...)
	runRelay(t, relay.New(s.Pool, s.Name, f.Pub, relay.Options{BatchSize: 10, PollInterval: 50 * time.Millisecond}))
	ctx := context.Background()
	fabrictest.Eventually(t, 10*time.Second, "every other row published", func() bool {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE published_at IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n >= 28
	})
	var published bool
	if err := s.Pool.QueryRow(ctx, `SELECT published_at IS NOT NULL FROM outbox_event WHERE id = $1`, held.ID).Scan(&published); err != nil {
		t.Fatal(err)
	}
	if published {
		t.Fatal("the aggregate's second row was published while its first one failed")
	}
}

// TestConcurrentRelaysKeepAggregateOrder runs three relays on one table
// while writers append events to 20 aggregates; a single-threaded consumer
// checks that each aggregate's sequence arrives in order and complete.
func TestConcurrentRelaysKeepAggregateOrder(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ob := outbox.New(f.Reg)
	const aggregates, perAggregate = 20, 40

	var mu sync.Mutex
	last := map[string]int{}
	count := 0
	var disorder []string
	f.Run(t, spec, func(ctx context.Context, e envelope.Envelope) error {
		var p struct {
			ServiceID  string `json:"serviceId"`
			FieldCount int    `json:"fieldCount"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return fabric.Invalid(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := last[p.ServiceID]; ok && p.FieldCount <= prev {
			disorder = append(disorder, fmt.Sprintf("%s: %d after %d", p.ServiceID, p.FieldCount, prev))
		}
		last[p.ServiceID] = p.FieldCount
		count++
		return nil
	}, fabric.ConsumerOptions{Concurrency: 1, Prefetch: 50})

	for i := 0; i < 3; i++ {
		runRelay(t, relay.New(s.Pool, s.Name, f.Pub, relay.Options{BatchSize: 25, PollInterval: 50 * time.Millisecond}))
	}
	var wg sync.WaitGroup
	for a := 0; a < aggregates; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			agg := fmt.Sprintf("agg-%02d", a)
			for i := 1; i <= perAggregate; i++ {
				enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: agg}, Envelope: submitted(t, i, agg)})
			}
		}(a)
	}
	wg.Wait()
	fabrictest.Eventually(t, 30*time.Second, "every event consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return count >= aggregates*perAggregate
	})
	mu.Lock()
	defer mu.Unlock()
	if len(disorder) > 0 {
		t.Fatalf("%d out-of-order deliveries, first: %v", len(disorder), disorder[:min(5, len(disorder))])
	}
	if count != aggregates*perAggregate {
		t.Fatalf("consumed %d, want %d (duplicates?)", count, aggregates*perAggregate)
	}
}

func TestRelayWaitsOutBrokerLossWithoutLosingRows(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ob := outbox.New(f.Reg)
	runRelay(t, relay.New(s.Pool, s.Name, f.Pub, relay.Options{BatchSize: 50, PollInterval: 50 * time.Millisecond}))
	var ids []string
	for i := 0; i < 300; i++ {
		e := submitted(t, i, "agg")
		ids = append(ids, e.ID)
		enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: fmt.Sprint(i)}, Envelope: e})
		if i == 100 || i == 200 {
			f.Vhost.CloseConnections(t)
		}
	}
	seen := map[string]bool{}
	fabrictest.Eventually(t, 30*time.Second, "all rows published after reconnects", func() bool {
		for _, d := range f.Drain(t, spec.Queue) {
			seen[d.MessageId] = true
		}
		return len(seen) == len(ids)
	})
	var pending int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox_event WHERE published_at IS NULL").Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Fatalf("pending = %d, want 0", pending)
	}
}

func TestRetentionDeletesOldPublishedRowsInBatches(t *testing.T) {
	s := fabrictest.NewSchema(t, env)
	f := fabrictest.NewFabric(t, env, desc())
	ob := outbox.New(f.Reg)
	for i := 0; i < 30; i++ {
		enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: "r"}, Envelope: submitted(t, i, "a")})
	}
	ctx := context.Background()
	// 25 published long ago, 5 pending.
	if _, err := s.Pool.Exec(ctx, `UPDATE outbox_event SET published_at = now() - interval '10 days' WHERE seq IN (SELECT seq FROM outbox_event ORDER BY seq LIMIT 25)`); err != nil {
		t.Fatal(err)
	}
	relay := relay.New(s.Pool, s.Name, f.Pub, relay.Options{RetentionBatch: 7})
	n, err := relay.DeletePublished(ctx, 7*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n != 25 {
		t.Fatalf("deleted %d, want 25", n)
	}
	if p, _ := relay.Pending(ctx); p != 5 {
		t.Fatalf("pending after retention = %d, want 5 (pending rows are never deleted)", p)
	}
}

// failingSender hands messages to the real publisher, except those whose
// id is in fail: their publish fails with the error given.
type failingSender struct {
	relay.Sender
	fail map[string]error
}

func (s failingSender) Send(ctx context.Context, m broker.Message) (*broker.Pending, error) {
	if err, ok := s.fail[m.MessageID]; ok {
		return nil, err
	}
	return s.Sender.Send(ctx, m)
}

// TestPublishErrorsAreRecordedWhateverTheirText: a publish error longer
// than last_error's limit, with a multi-byte character at the cut, or with
// a NUL in it, is recorded; PostgreSQL refusing it would fail the whole
// batch's update and republish the rows the broker had already confirmed.
func TestPublishErrorsAreRecordedWhateverTheirText(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	ob := outbox.New(f.Reg)
	var ids []string
	for i := range 4 {
		e := submitted(t, i, "agg")
		ids = append(ids, e.ID)
		enqueue(t, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: fmt.Sprint("r", i)}, Envelope: e})
	}
	// 1,999 ASCII bytes, then "ç" (2 bytes) straddling the 2,000-byte limit.
	long := strings.Repeat("a", 1999) + strings.Repeat("ção ", 100)
	sender := failingSender{Sender: f.Pub, fail: map[string]error{
		ids[1]: errors.New(long),
		ids[2]: errors.New("broker said \x00 and \xff"),
	}}
	relay := relay.New(s.Pool, s.Name, sender, relay.Options{})
	res, err := relay.RelayOnce(context.Background())
	if err != nil {
		t.Fatalf("RelayOnce: %v", err)
	}
	if res.Published != 2 || res.Failed != 2 {
		t.Fatalf("RelayOnce = %+v, want 2 published and 2 failed", res)
	}
	rows, err := s.Pool.Query(context.Background(), "SELECT id::text, published_at IS NOT NULL, coalesce(last_error, '') FROM outbox_event")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	published := map[string]bool{}
	for rows.Next() {
		var id, lastErr string
		var pub bool
		if err := rows.Scan(&id, &pub, &lastErr); err != nil {
			t.Fatal(err)
		}
		got[id], published[id] = lastErr, pub
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !published[ids[0]] || !published[ids[3]] || published[ids[1]] || published[ids[2]] {
		t.Errorf("published = %v, want %s and %s only", published, ids[0], ids[3])
	}
	// Cut to 2,000 bytes at a character boundary, the last three of them
	// the ellipsis that marks the cut.
	if want := strings.Repeat("a", 1997) + "…"; got[ids[1]] != want {
		t.Errorf("last_error of the long error = %d bytes %q…, want 1,997 bytes and an ellipsis", len(got[ids[1]]), got[ids[1]][:min(20, len(got[ids[1]]))])
	}
	if got[ids[2]] != "broker said  and \uFFFD" {
		t.Errorf("last_error of the NUL error = %q", got[ids[2]])
	}
}

// TestRunReturnsOnlyAfterItsListenerStops: Run's LISTEN goroutine (and its
// UNLISTEN on the way out, which gives the pool connection back clean) has
// ended when Run returns. Repeated, since stopping is quick either way.
func TestRunReturnsOnlyAfterItsListenerStops(t *testing.T) {
	f := fabrictest.NewFabric(t, env, desc())
	s := fabrictest.NewSchema(t, env)
	relay := relay.New(s.Pool, s.Name, f.Pub, relay.Options{PollInterval: time.Minute})
	const listener = "relay.(*Relay).listen"
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- relay.Run(ctx) }()
		fabrictest.Eventually(t, 5*time.Second, "the listener running", func() bool { return fabrictest.GoroutinesIn(listener) == 1 })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
		if n := fabrictest.GoroutinesIn(listener); n != 0 {
			t.Fatalf("round %d: %d listener goroutines still running after Run returned", i, n)
		}
	}
}
