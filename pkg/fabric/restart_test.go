package fabric_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// restartPublisher publishes one event after another until stopped. Each
// event is retried under the same id until the broker confirms it, as an
// outbox relay does: a publish that failed may still have reached the
// queue, so a retry can make a duplicate (the consumer's inbox absorbs
// it), never a loss.
type restartPublisher struct {
	pub *broker.Publisher
	t   *testing.T
	up  atomic.Bool // the broker is back: confirms count in afterUp

	mu        sync.Mutex
	confirmed []string
	afterUp   int
	retried   int            // events that needed more than one attempt
	failures  map[string]int // failed attempts by kind
}

func (p *restartPublisher) run(stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		e := submitted(p.t, "org-a", "ok")
		first := time.Now()
		for attempt := 1; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := p.pub.Publish(ctx, e)
			cancel()
			p.mu.Lock()
			if err == nil {
				p.confirmed = append(p.confirmed, e.ID)
				if attempt > 1 {
					p.retried++
				}
				if p.up.Load() {
					p.afterUp++
				}
			} else {
				p.failures[failureKind(err)]++
			}
			p.mu.Unlock()
			if err == nil {
				break
			}
			if time.Since(first) > 2*time.Minute {
				return fmt.Errorf("event %s not confirmed after %d attempts over 2 min: %w", e.ID, attempt, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func failureKind(err error) string {
	switch {
	case errors.Is(err, broker.ErrConnectionLost):
		return "connection lost"
	case errors.Is(err, broker.ErrConfirmTimeout):
		return "confirm timeout"
	case errors.Is(err, context.DeadlineExceeded):
		return "5s deadline"
	}
	return err.Error()
}

func (p *restartPublisher) snapshot() (confirmed []string, afterUp, retried int, failures string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.confirmed...), p.afterUp, p.retried, fmt.Sprint(p.failures)
}

// TestBrokerRestart stops and starts the RabbitMQ application while a
// publisher keeps publishing and an inbox consumer keeps consuming: every
// confirmed event must have exactly one effect. It disturbs every client of
// the node, so `make test` runs it alone after all other tests.
func TestBrokerRestart(t *testing.T) {
	s := newStack(t)
	db := fabrictest.NewSchema(t, testEnv)
	ctx := context.Background()
	// No uniqueness: a duplicated effect must show.
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	// The outbox path with production's defaults: a connection of its own
	// (default reconnect backoff) and a relay with default options. Rows
	// enqueued while the broker is down measure how long after its return
	// the platform has caught up.
	relayConn, err := broker.Dial(ctx, s.Vhost.URL, broker.Options{Name: "relay"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relayConn.Close() })
	relayPub, err := broker.NewPublisher(relayConn, s.Reg, broker.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relayPub.Close() })
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.New(db.Pool, db.Name, relayPub, relay.Options{}).Run(relayCtx) }()
	t.Cleanup(func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	in := inbox.New(db.Pool, db.Name, testQueue, inbox.Options{})
	// One handler at a time, so the marker at the end is handled after
	// everything queued before it, redeliveries included.
	s.run(t, in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		_, err := tx.Exec(ctx, `INSERT INTO effect (event_id) VALUES ($1)`, e.ID)
		return err
	}), fabric.ConsumerOptions{Concurrency: 1})
	effects := func() map[string]int {
		rows, err := db.Pool.Query(ctx, `SELECT event_id::text, count(*) FROM effect GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			out[id] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}

	p := &restartPublisher{pub: s.Pub, t: t, failures: map[string]int{}}
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() { pubDone <- p.run(stop) }()
	stopPublisher := func() {
		if stop != nil {
			close(stop)
			stop = nil
			if err := <-pubDone; err != nil {
				t.Errorf("publisher: %v", err)
			}
		}
	}
	t.Cleanup(stopPublisher)
	fabrictest.Eventually(t, 30*time.Second, "200 events confirmed before the restart", func() bool {
		c, _, _, _ := p.snapshot()
		return len(c) >= 200
	})

	before := s.Conn.Connects()
	// The broker stays down for outage, long enough for every client's
	// reconnect and retry backoff to grow to its cap, as in a real restart.
	const duringOutage, outage = 50, 12 * time.Second
	var queuedInOutage []string
	var back time.Time
	for _, args := range [][]string{{"stop_app"}, {"start_app"}, {"await_startup"}} {
		if out, err := exec.Command("rabbitmqctl", args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %v: %v: %s", args, err, out)
		}
		switch args[0] {
		case "stop_app":
			down := time.Now()
			queuedInOutage = enqueue(t, db, duringOutage)
			time.Sleep(time.Until(down.Add(outage)))
		case "start_app":
			if err := db.Pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&back); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.up.Store(true)
	fabrictest.Eventually(t, 90*time.Second, "200 events confirmed after the restart", func() bool {
		_, n, _, _ := p.snapshot()
		return n >= 200
	})
	stopPublisher()
	if t.Failed() {
		t.FailNow()
	}
	if s.Conn.Connects() <= before {
		t.Fatalf("connects = %d after restart, want > %d", s.Conn.Connects(), before)
	}
	confirmed, _, retried, failures := p.snapshot()
	// The publisher must have published into the outage, not only before
	// and after it: some event was retried until the broker was back.
	if retried == 0 {
		t.Fatalf("no event needed a second attempt (failures %s): the publisher never published into the outage", failures)
	}

	var lost []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := effects()
		lost = lost[:0]
		for _, id := range confirmed {
			if got[id] == 0 {
				lost = append(lost, id)
			}
		}
		if len(lost) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A duplicated effect would come from a redelivery or a re-sent copy
	// still queued: a marker queued behind all of them is handled after
	// them (one handler at a time, FIFO queue).
	marker := submitted(t, "org-a", "ok")
	if err := s.Pub.Publish(ctx, marker); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 30*time.Second, "the marker's effect", func() bool { return effects()[marker.ID] == 1 })
	dupes := 0
	for id, n := range effects() {
		if n > 1 {
			dupes++
			t.Errorf("event %s has %d effects, want 1", id, n)
		}
	}
	// Recovery: the last effect of the events enqueued in the outbox while
	// the broker was down, after the broker was back (the database's clock
	// for both).
	var caughtUp time.Time
	fabrictest.Eventually(t, 60*time.Second, "the effects of every event enqueued during the outage", func() bool {
		var n int
		if err := db.Pool.QueryRow(ctx, "SELECT count(DISTINCT event_id), coalesce(max(at), now()) FROM effect WHERE event_id::text = ANY($1)",
			queuedInOutage).Scan(&n, &caughtUp); err != nil {
			t.Fatal(err)
		}
		return n == len(queuedInOutage)
	})
	t.Logf("broker restarted: confirmed %d, lost %d, duplicated effects %d (events retried through the outage %d, failed attempts %s, reconnects %d); "+
		"the %d events enqueued in the outbox during the %s outage were all handled %.1f s after the broker was back (start_app returned; default reconnect and relay backoff)",
		len(confirmed), len(lost), dupes, retried, failures, s.Conn.Connects()-before, len(queuedInOutage), outage, caughtUp.Sub(back).Seconds())
	if len(lost) != 0 || dupes != 0 {
		t.Errorf("lost %d (first: %v), duplicated effects %d: both must be 0", len(lost), lost[:min(3, len(lost))], dupes)
	}
}

// enqueue commits n events into the outbox of db and returns their ids.
func enqueue(t *testing.T, db *fabrictest.Schema, n int) []string {
	t.Helper()
	ctx := context.Background()
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(reg)
	var ids []string
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for i := 0; i < n; i++ {
			e := submitted(t, "org-a", "ok")
			ids = append(ids, e.ID)
			if err := ob.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("enqueue during the outage: %v", err)
	}
	return ids
}
