package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
)

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// BenchmarkOutboxLatencyAtFixedRate offers 1,000 single-event transactions
// per second for 5 s and reports commit→confirmed latency (published_at,
// stamped after the broker's confirm, minus the commit time seen by the
// writer) at p50 and p99, with one relay of one worker and of two.
func BenchmarkOutboxLatencyAtFixedRate(b *testing.B) {
	for _, c := range []struct {
		workers int
		wake    string
	}{{1, "notify"}, {2, "notify"}, {1, "direct"}, {2, "direct"}} {
		b.Run(fmt.Sprintf("workers=%d/wake=%s", c.workers, c.wake), func(b *testing.B) { outboxLatency(b, c.workers, c.wake == "direct") })
	}
}

// outboxLatency measures commit → confirmed; direct wakes the relay from
// Enqueue (Outbox.WithWake, as services run it) instead of by NOTIFY.
func outboxLatency(b *testing.B, workers int, direct bool) {
	const rate, seconds = 1000, 5
	for i := 0; i < b.N; i++ {
		f := fabrictest.NewFabric(b, env, desc())
		s := fabrictest.NewSchema(b, env)
		ob := outbox.New(f.Reg)
		relay := relay.New(s.Pool, s.Name, f.Pub, relay.Options{Workers: workers})
		if direct {
			ob = ob.WithWake(relay.Expect)
		}
		runRelay(b, relay)
		awaitListening(b, s) // or the first rows wait for the poll
		committed := make(map[string]time.Time, rate*seconds)
		var mu sync.Mutex
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / rate)
		start := time.Now()
		for n := 0; n < rate*seconds; n++ {
			<-tick.C
			e := submitted(b, n, "bench")
			wg.Add(1)
			go func() {
				defer wg.Done()
				enqueue(b, s, ob, true, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e})
				mu.Lock()
				committed[e.ID] = time.Now()
				mu.Unlock()
			}()
		}
		tick.Stop()
		wg.Wait()
		offered := time.Since(start)
		fabrictest.Eventually(b, 60*time.Second, "outbox drained", func() bool {
			var n int
			s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM outbox_event WHERE published_at IS NULL").Scan(&n)
			return n == 0
		})
		rows, err := s.Pool.Query(context.Background(), "SELECT id::text, published_at FROM outbox_event")
		if err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		for rows.Next() {
			var id string
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, at.Sub(committed[id]))
		}
		b.ReportMetric(float64(len(lat))/offered.Seconds(), "offered_rows/s")
		b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99_ms")
		f.Drain(b, spec.Queue)
	}
}

// backlog enqueues n pending rows: 8 writers, 50 rows per transaction.
func backlog(b *testing.B, s *fabrictest.Schema, f *fabrictest.Fabric, n int) {
	ob := outbox.New(f.Reg)
	var wg sync.WaitGroup
	per := n / 8
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < per; i += 50 {
				var items []outbox.Item
				for j := 0; j < 50; j++ {
					e := submitted(b, i+j, fmt.Sprint("w", w))
					items = append(items, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e})
				}
				enqueue(b, s, ob, true, items...)
			}
		}(w)
	}
	wg.Wait()
}

// relayDrain measures how fast one relay with the given workers publishes
// every pending row of s.
func relayDrain(b *testing.B, s *fabrictest.Schema, f *fabrictest.Fabric, workers int) float64 {
	ctx := context.Background()
	var n int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM outbox_event WHERE published_at IS NULL").Scan(&n); err != nil {
		b.Fatal(err)
	}
	relay := relay.New(s.Pool, s.Name, f.Pub, relay.Options{BatchSize: 500, Workers: workers})
	start := time.Now()
	stop := runRelay(b, relay)
	// The probe walks the claim's index (relay.Pending counts by a
	// sequential scan of every row, published ones included): asked every
	// 20 ms it took a core of this two-core machine from the relay and the
	// broker it measures.
	fabrictest.Eventually(b, 5*time.Minute, "outbox drained", func() bool {
		var pending bool
		if err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbox_event
			WHERE published_at IS NULL AND publication_attempts >= 0)`).Scan(&pending); err != nil {
			b.Fatal(err)
		}
		return !pending
	})
	rate := float64(n) / time.Since(start).Seconds()
	stop()
	if left, err := relay.Pending(ctx); err != nil || left != 0 {
		b.Fatalf("after the drain: %d rows pending (%v)", left, err)
	}
	purge(b, f, spec.Queue)
	return rate
}

// rawPublish is the baseline of relayDrain: amqp091-go alone publishing
// what the pending rows of s hold (body, properties and headers as the
// relay sends them), on the fabric's connection to the same queue,
// mandatory and persistent, with the publisher's window of confirms.
func rawPublish(b *testing.B, s *fabrictest.Schema, f *fabrictest.Fabric) float64 {
	ctx := context.Background()
	rows, err := s.Pool.Query(ctx, `SELECT id::text, exchange, routing_key, event_type, headers::text, body, occurred_at
		FROM outbox_event WHERE published_at IS NULL ORDER BY seq`)
	if err != nil {
		b.Fatal(err)
	}
	type msg struct {
		exchange, key string
		pub           amqp.Publishing
	}
	var msgs []msg
	for rows.Next() {
		var m msg
		var headers string
		if err := rows.Scan(&m.pub.MessageId, &m.exchange, &m.key, &m.pub.Type, &headers, &m.pub.Body, &m.pub.Timestamp); err != nil {
			b.Fatal(err)
		}
		stored := map[string]any{}
		if err := json.Unmarshal([]byte(headers), &stored); err != nil {
			b.Fatal(err)
		}
		m.pub.CorrelationId, _ = stored[wire.StoredCorrelation].(string)
		delete(stored, wire.StoredCorrelation)
		m.pub.Headers = stored
		m.pub.ContentType, m.pub.DeliveryMode, m.pub.Timestamp = "application/json", amqp.Persistent, m.pub.Timestamp.UTC()
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	ch, err := f.Conn.Channel(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	const window = 256 // broker.PublisherOptions' default
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, window+16))
	returns := ch.NotifyReturn(make(chan amqp.Return, len(msgs)))
	start := time.Now()
	inflight := 0
	for _, m := range msgs {
		for ; inflight >= window; inflight-- {
			if c := <-confirms; !c.Ack {
				b.Fatal("raw publish: nack")
			}
		}
		if err := ch.PublishWithContext(ctx, m.exchange, m.key, true, false, m.pub); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if c := <-confirms; !c.Ack {
			b.Fatal("raw publish: nack")
		}
	}
	rate := float64(len(msgs)) / time.Since(start).Seconds()
	if len(returns) > 0 {
		b.Fatalf("raw publish: %d messages returned unroutable", len(returns))
	}
	purge(b, f, spec.Queue)
	return rate
}

// purge empties queue: cheaper than consuming 20,000 messages one by one,
// and nothing reads them.
func purge(b *testing.B, f *fabrictest.Fabric, queue string) {
	ch, err := f.Conn.Channel(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueuePurge(queue, false); err != nil {
		b.Fatalf("purge %s: %v", queue, err)
	}
}

// BenchmarkRelayThroughput measures how fast one relay (of one worker and
// of two) drains a backlog of 20,000 rows, on an empty table and on one
// holding 1,000,000 already-published rows (the partial index on pending
// rows should keep it flat), against amqp091-go alone publishing the same
// messages to the same queue in the same run: rows/s, raw_msg/s and
// relay/raw.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, c := range []struct{ published, workers int }{{0, 1}, {0, 2}, {1_000_000, 2}} {
		published := c.published
		b.Run(fmt.Sprintf("published=%d/workers=%d", published, c.workers), func(b *testing.B) {
			var relayed, raw float64
			for i := 0; i < b.N; i++ {
				f := fabrictest.NewFabric(b, env, desc())
				s := fabrictest.NewSchema(b, env)
				if published > 0 {
					if _, err := s.Pool.Exec(context.Background(), `
						INSERT INTO outbox_event (id, tenant_id, aggregate_type, aggregate_id, event_type, event_version,
							payload, body, exchange, routing_key, occurred_at, published_at, publication_attempts)
						SELECT gen_random_uuid(), 'org-a', 'request', g::text, 'request.submitted.v1', '1',
							'{"k":"v"}', '\x7b7d', 'platform.events', 'request.submitted.v1', now(), now(), 1
						FROM generate_series(1, $1) g`, published); err != nil {
						b.Fatal(err)
					}
					// Steady state: the bulk load is vacuumed and analysed, as autovacuum would.
					if _, err := s.Pool.Exec(context.Background(), "VACUUM ANALYZE outbox_event"); err != nil {
						b.Fatal(err)
					}
				}
				backlog(b, s, f, 20_000)
				raw += rawPublish(b, s, f)
				// Start the drain from a quiet database: the bulk load's WAL
				// flushed, no checkpoint due in the middle of it.
				if _, err := s.Pool.Exec(context.Background(), "CHECKPOINT"); err != nil {
					b.Fatal(err)
				}
				relayed += relayDrain(b, s, f, c.workers)
			}
			b.ReportMetric(relayed/float64(b.N), "rows/s")
			b.ReportMetric(raw/float64(b.N), "raw_msg/s")
			b.ReportMetric(relayed/raw, "relay/raw")
		})
	}
}

// BenchmarkConsumer measures a consumer whose handler commits one row per
// message, with and without the inbox claim in the same transaction, over
// 5,000 pre-published messages. Compare the two msg/s figures (target:
// inbox ≥ 0.8× without).
// BenchmarkConsumer compares a consumer committing one row per message
// with and without the inbox, per message (one transaction each) and in
// batches (what services run: host.ConsumeTx, inbox.BatchHandler; without
// the inbox, the same batch in one plain transaction).
func BenchmarkConsumer(b *testing.B) {
	const n = 5000
	for _, batched := range []bool{false, true} {
		for _, withInbox := range []bool{false, true} {
			b.Run(fmt.Sprintf("batched=%v/inbox=%v", batched, withInbox), func(b *testing.B) { consume(b, n, batched, withInbox) })
		}
	}
}

func consume(b *testing.B, n int, batched, withInbox bool) {
	for i := 0; i < b.N; i++ {
		f := fabrictest.NewFabric(b, env, desc())
		s := fabrictest.NewSchema(b, env)
		ctx := context.Background()
		if _, err := s.Pool.Exec(ctx, `CREATE TABLE effect (event_id uuid NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		var pend []*broker.Pending
		for j := 0; j < n; j++ {
			p, err := f.Pub.PublishAsync(ctx, submitted(b, j, "c"))
			if err != nil {
				b.Fatal(err)
			}
			pend = append(pend, p)
		}
		for _, p := range pend {
			if err := p.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		var done sync.WaitGroup
		done.Add(n)
		effectOnly := func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
			_, err := tx.Exec(ctx, `INSERT INTO effect (event_id) VALUES ($1)`, e.ID)
			return err
		}
		counted := func(errs []error) []error {
			for _, err := range errs {
				if err == nil {
					done.Done()
				}
			}
			return errs
		}
		in := inbox.New(s.Pool, s.Name, spec.Queue, inbox.Options{})
		opts := fabric.ConsumerOptions{Prefetch: 100, Concurrency: 8}
		start := time.Now()
		var stop func()
		switch {
		case batched && withInbox:
			bh := in.BatchHandler(effectOnly)
			stop = f.RunBatch(b, spec, func(ctx context.Context, batch []fabric.Received) []error {
				return counted(bh(ctx, batch))
			}, opts)
		case batched:
			stop = f.RunBatch(b, spec, func(ctx context.Context, batch []fabric.Received) []error {
				err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
					for _, m := range batch {
						if err := effectOnly(m.Ctx, tx, m.Env); err != nil {
							return err
						}
					}
					return nil
				})
				errs := make([]error, len(batch))
				for i := range errs {
					errs[i] = err
				}
				return counted(errs)
			}, opts)
		case withInbox:
			h := in.Handler(effectOnly)
			stop = f.Run(b, spec, func(ctx context.Context, e envelope.Envelope) error {
				return counted([]error{h(ctx, e)})[0]
			}, opts)
		default:
			stop = f.Run(b, spec, func(ctx context.Context, e envelope.Envelope) error {
				err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error { return effectOnly(ctx, tx, e) })
				return counted([]error{err})[0]
			}, opts)
		}
		done.Wait()
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msg/s")
		stop()
	}
}
