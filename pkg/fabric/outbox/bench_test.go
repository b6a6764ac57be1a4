package outbox_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
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

// relayDrain enqueues n pending rows (8 writers, 50 rows per transaction),
// then measures how fast one relay with the given workers publishes them
// all.
func relayDrain(b *testing.B, s *fabrictest.Schema, f *fabrictest.Fabric, n, workers int) float64 {
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
	relay := relay.New(s.Pool, s.Name, f.Pub, relay.Options{BatchSize: 500, Workers: workers})
	start := time.Now()
	stop := runRelay(b, relay)
	fabrictest.Eventually(b, 5*time.Minute, "outbox drained", func() bool {
		n, err := relay.Pending(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return n == 0
	})
	rate := float64(per*8) / time.Since(start).Seconds()
	stop()
	f.Drain(b, spec.Queue)
	return rate
}

// BenchmarkRelayThroughput compares relay throughput with one worker and
// two overlapping ones, on an empty table and on one holding 1,000,000
// already-published rows (the partial index on pending rows should keep it
// flat).
func BenchmarkRelayThroughput(b *testing.B) {
	for _, c := range []struct{ published, workers int }{{0, 1}, {0, 2}, {1_000_000, 2}} {
		published := c.published
		b.Run(fmt.Sprintf("published=%d/workers=%d", published, c.workers), func(b *testing.B) {
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
				// Start both cases from a quiet database: the bulk load's WAL
				// flushed, no checkpoint due in the middle of the drain.
				if _, err := s.Pool.Exec(context.Background(), "CHECKPOINT"); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(relayDrain(b, s, f, 20_000, c.workers), "rows/s")
			}
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
