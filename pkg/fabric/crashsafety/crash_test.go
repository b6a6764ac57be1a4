package crashsafety_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// The suite runs producers, relays and consumers as child processes of the
// test binary and makes them die at deterministic fault points with
// os.Exit — a real crash: no deferred cleanup, no ack, no rollback beyond
// what the database and broker do for a dead client. Before dying, a child
// writes a report (envReport) naming the fault point and the work it holds
// there, so the parent counts only faults that hit work in flight.
const (
	envRole     = "CRASH_ROLE"
	envCrashAt  = "CRASH_AT" // point:n — exit at the n-th hit of point
	envAMQP     = "CRASH_AMQP_URL"
	envDB       = "CRASH_DATABASE_URL"
	envSchema   = "CRASH_SCHEMA"
	envCount    = "CRASH_COUNT"
	envQueue    = "CRASH_QUEUE"
	envSlowMs   = "CRASH_SLOW_MS"
	envHold     = "CRASH_HOLD"        // consumer: after n effects, report and hang until killed
	envHandlers = "CRASH_CONCURRENCY" // consumer: handlers at once (default 4)
	envReport   = "CRASH_REPORT"      // file the child appends its fault report to
	crashedCode = 3
	// pointHold is the report of a consumer hanging mid-batch (envHold),
	// waiting for the parent's SIGKILL.
	pointHold = "consumer.hold"
)

// faultReport is what a child knew when it reached its fault point.
type faultReport struct {
	Point string `json:"point"`
	// InFlight: the work held at that moment — the event just committed
	// (producer), the outbox rows the relay's transaction has claimed, the
	// events whose handler has not returned (consumer).
	InFlight []string `json:"inFlight"`
	// At is the event that reached the point, when the child knows it.
	At string `json:"at,omitempty"`
}

var consumers = []topology.Consumer{
	{Queue: "crash-a.request-submitted", Service: "crash-a", RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}},
	{Queue: "crash-b.request-submitted", Service: "crash-b", RetryTiers: []topology.Duration{topology.Duration(100 * time.Millisecond)},
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}},
}

func desc() topology.Description {
	return topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: consumers}
}

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		if err := child(role); err != nil {
			fmt.Fprintf(os.Stderr, "crash child %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashAt exits the process at the n-th hit of one point, after writing
// a report of the work in flight there (witness).
type crashAt struct {
	point   string
	n       int64
	hits    atomic.Int64
	report  string
	witness func(point string) (faultReport, error)
}

func parseCrashAt(s string) (*crashAt, error) {
	c := &crashAt{report: os.Getenv(envReport)}
	if s == "" {
		return c, nil
	}
	point, n, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("%s=%q: want point:n", envCrashAt, s)
	}
	var err error
	if c.n, err = strconv.ParseInt(n, 10, 64); err != nil || c.n <= 0 {
		return nil, fmt.Errorf("%s=%q: want point:n with n > 0", envCrashAt, s)
	}
	c.point = point
	return c, nil
}

func (c *crashAt) Hit(point string) {
	if point != c.point || c.hits.Add(1) != c.n {
		return
	}
	r := faultReport{Point: point}
	if c.witness != nil {
		var err error
		if r, err = c.witness(point); err != nil {
			// No report: the parent finds the fault unverified.
			fmt.Fprintf(os.Stderr, "crash child: witness at %s: %v\n", point, err)
			os.Exit(crashedCode)
		}
		r.Point = point
	}
	writeReport(c.report, r)
	os.Exit(crashedCode)
}

// writeReport appends r to path and syncs it: the process dies next.
func writeReport(path string, r faultReport) {
	b, err := json.Marshal(r)
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			_, err = f.Write(append(b, '\n'))
			if serr := f.Sync(); err == nil {
				err = serr
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child: report %s: %v\n", path, err)
	}
}

// inFlight tracks the events whose handler is running.
type inFlight struct {
	mu  sync.Mutex
	ids map[string]int
}

func (f *inFlight) wrap(h fabric.Handler) fabric.Handler {
	return func(ctx context.Context, e envelope.Envelope) error {
		f.mu.Lock()
		f.ids[e.ID]++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.ids[e.ID]--; f.ids[e.ID] == 0 {
				delete(f.ids, e.ID)
			}
			f.mu.Unlock()
		}()
		return h(ctx, e)
	}
}

func (f *inFlight) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.ids))
	for id := range f.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// claimedRows returns the pending outbox rows some transaction holds
// locked: with one relay running, the rows its batch has claimed.
func claimedRows(ctx context.Context, pool *pgxpool.Pool, schema string) ([]string, error) {
	var claimed []string
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		pending, err := queryIDs(ctx, tx, `SELECT id::text FROM `+schema+`.outbox_event WHERE published_at IS NULL`)
		if err != nil {
			return err
		}
		free, err := queryIDs(ctx, tx, `SELECT id::text FROM `+schema+`.outbox_event WHERE published_at IS NULL FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		unlocked := map[string]bool{}
		for _, id := range free {
			unlocked[id] = true
		}
		for _, id := range pending {
			if !unlocked[id] {
				claimed = append(claimed, id)
			}
		}
		return errRollback // release the locks taken to look
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return claimed, err
}

func queryIDs(ctx context.Context, tx pgx.Tx, query string) ([]string, error) {
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func child(role string) error {
	ctx := context.Background()
	faults, err := parseCrashAt(os.Getenv(envCrashAt))
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, os.Getenv(envDB))
	if err != nil {
		return err
	}
	schema := os.Getenv(envSchema)
	slow, err := envInt(envSlowMs)
	if err != nil {
		return err
	}
	reg, err := registry.Default()
	if err != nil {
		return err
	}
	conn, err := broker.Dial(ctx, os.Getenv(envAMQP), broker.Options{Name: role},
		func(ctx context.Context, c *amqp.Connection) error { return topology.Apply(ctx, c, desc()) })
	if err != nil {
		return err
	}
	pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{})
	if err != nil {
		return err
	}
	switch role {
	case "producer":
		n, err := envInt(envCount)
		if err != nil {
			return err
		}
		return produce(ctx, pool, schema, outbox.New(reg), n, time.Duration(slow)*time.Millisecond, faults)
	case "relay":
		faults.witness = func(string) (faultReport, error) {
			claimed, err := claimedRows(ctx, pool, schema)
			return faultReport{InFlight: claimed}, err
		}
		relay := relay.New(pool, schema, pub, relay.Options{BatchSize: 20, PollInterval: 50 * time.Millisecond, Faults: faults})
		for {
			if _, err := relay.RelayOnce(ctx); err != nil {
				return err
			}
			if n, err := relay.Pending(ctx); err != nil || n == 0 {
				return err
			}
		}
	case "consumer":
		spec, ok := desc().Consumer(os.Getenv(envQueue))
		if !ok {
			return fmt.Errorf("%s=%q: no such consumer", envQueue, os.Getenv(envQueue))
		}
		hold, err := envInt(envHold)
		if err != nil {
			return err
		}
		handlers, err := envInt(envHandlers)
		if err != nil {
			return err
		}
		running := &inFlight{ids: map[string]int{}}
		faults.witness = func(string) (faultReport, error) {
			r := faultReport{InFlight: running.list()}
			if handlers == 1 && len(r.InFlight) == 1 {
				r.At = r.InFlight[0] // the one handler is the one at the point
			}
			return r, nil
		}
		h := effect(spec.Queue, time.Duration(slow)*time.Millisecond)
		if hold > 0 {
			h = holdAfter(h, hold, os.Getenv(envReport), running)
		}
		in := inbox.New(pool, schema, spec.Queue, inbox.Options{Faults: faults})
		c, err := broker.NewConsumer(conn, pub, reg, spec, running.wrap(in.Handler(h)),
			fabric.ConsumerOptions{Prefetch: 50, Concurrency: cmp.Or(handlers, 4)})
		if err != nil {
			return err
		}
		// Runs until the parent kills it or a fault point ends it.
		return c.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

func envInt(name string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return n, nil
}

// effect is the consumers' side effect: one row per handled event, with no
// uniqueness, so a duplicate effect would be visible.
func effect(consumer string, slow time.Duration) fabric.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		time.Sleep(slow)
		_, err := tx.Exec(ctx, `INSERT INTO effect (consumer, event_id) VALUES ($1, $2)`, consumer, e.ID)
		return err
	}
}

// holdAfter runs h until n effects are written; then it reports the work in
// flight (pointHold) and every handler hangs inside its transaction, its
// effect written but not committed and its message not acked, so the
// parent's SIGKILL lands in the middle of a prefetched batch.
func holdAfter(h fabric.TxHandler, n int, report string, running *inFlight) fabric.TxHandler {
	var written atomic.Int64
	var once sync.Once
	return func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		if written.Load() >= int64(n) {
			select {}
		}
		if err := h(ctx, tx, e); err != nil {
			return err
		}
		if written.Add(1) >= int64(n) {
			once.Do(func() { writeReport(report, faultReport{Point: pointHold, InFlight: running.list(), At: e.ID}) })
			select {}
		}
		return nil
	}
}

// produce writes n business transactions, each a request row and its
// event, pausing slow between them; every seventh is rolled back (its id
// is recorded elsewhere so the parent can prove it was never published).
func produce(ctx context.Context, pool *pgxpool.Pool, schema string, ob *outbox.Outbox, n int, slow time.Duration, faults *crashAt) error {
	var committed string
	faults.witness = func(string) (faultReport, error) {
		return faultReport{InFlight: []string{committed}, At: committed}, nil
	}
	for i := 0; i < n; i++ {
		time.Sleep(slow)
		e, err := envelope.New("request.submitted.v1", "org-crash", "crash-producer", map[string]any{
			"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001", "serviceId": "s",
			"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": "2026-11-30T10:00:00Z"})
		if err != nil {
			return err
		}
		rollback := i%7 == 3
		if rollback {
			if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.rolled_back (id) VALUES ($1)`, e.ID); err != nil {
				return err
			}
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL search_path = `+schema); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO request_row (id) VALUES ($1)`, e.ID); err != nil {
				return err
			}
			if err := ob.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: e.ID}, Envelope: e}); err != nil {
				return err
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		if err != nil && !errors.Is(err, errRollback) {
			return err
		}
		if !rollback {
			committed = e.ID
			faults.Hit("producer.after-commit")
		}
	}
	return nil
}

var errRollback = errors.New("business rule said no")
