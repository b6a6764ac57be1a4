package crashsafety_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// The suite runs producers, relays and consumers as child processes of the
// test binary and makes them die at deterministic fault points with
// os.Exit — a real crash: no deferred cleanup, no ack, no rollback beyond
// what the database and broker do for a dead client.
const (
	envRole     = "CRASH_ROLE"
	envCrashAt  = "CRASH_AT" // point:n — exit at the n-th hit of point
	envAMQP     = "CRASH_AMQP_URL"
	envDB       = "CRASH_DATABASE_URL"
	envSchema   = "CRASH_SCHEMA"
	envCount    = "CRASH_COUNT"
	envQueue    = "CRASH_QUEUE"
	envSlowMs   = "CRASH_SLOW_MS"
	crashedCode = 3
)

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

// crashAt exits the process at the n-th hit of one point.
type crashAt struct {
	point string
	n     int64
	hits  atomic.Int64
}

func parseCrashAt(s string) *crashAt {
	point, n, ok := strings.Cut(s, ":")
	if !ok {
		return &crashAt{}
	}
	c := &crashAt{point: point}
	c.n, _ = strconv.ParseInt(n, 10, 64)
	return c
}

func (c *crashAt) Hit(point string) {
	if point == c.point && c.hits.Add(1) == c.n {
		os.Exit(crashedCode)
	}
}

func child(role string) error {
	ctx := context.Background()
	faults := parseCrashAt(os.Getenv(envCrashAt))
	pool, err := pgxpool.New(ctx, os.Getenv(envDB))
	if err != nil {
		return err
	}
	schema := os.Getenv(envSchema)
	reg, err := registry.Default()
	if err != nil {
		return err
	}
	conn, err := broker.Dial(ctx, os.Getenv(envAMQP), broker.Options{Name: role},
		func(ctx context.Context, c *amqp.Connection) error { return topology.Apply(ctx, c, desc()) })
	if err != nil {
		return err
	}
	pub, err := fabric.NewPublisher(conn, reg, fabric.PublisherOptions{})
	if err != nil {
		return err
	}
	switch role {
	case "producer":
		n, _ := strconv.Atoi(os.Getenv(envCount))
		return produce(ctx, pool, schema, outbox.New(reg), n, faults)
	case "relay":
		relay := outbox.NewRelay(pool, schema, pub, outbox.RelayOptions{BatchSize: 20, PollInterval: 50 * time.Millisecond, Faults: faults})
		for {
			if _, err := relay.RelayOnce(ctx); err != nil {
				return err
			}
			if n, err := relay.Pending(ctx); err != nil || n == 0 {
				return err
			}
		}
	case "consumer":
		spec, _ := desc().Consumer(os.Getenv(envQueue))
		slow, _ := strconv.Atoi(os.Getenv(envSlowMs))
		in := inbox.New(pool, schema, spec.Queue, inbox.Options{Faults: faults})
		c, err := fabric.NewConsumer(conn, pub, reg, spec, in.Handler(effect(spec.Queue, time.Duration(slow)*time.Millisecond)),
			fabric.ConsumerOptions{Prefetch: 50, Concurrency: 4})
		if err != nil {
			return err
		}
		// Runs until the parent kills it or a fault point ends it.
		return c.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}

// effect is the consumers' side effect: one row per handled event, with no
// uniqueness, so a duplicate effect would be visible.
func effect(consumer string, slow time.Duration) inbox.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		time.Sleep(slow)
		_, err := tx.Exec(ctx, `INSERT INTO effect (consumer, event_id) VALUES ($1, $2)`, consumer, e.ID)
		return err
	}
}

// produce writes n business transactions, each a request row and its
// event; every seventh is rolled back (its id is recorded elsewhere so the
// parent can prove it was never published).
func produce(ctx context.Context, pool *pgxpool.Pool, schema string, ob *outbox.Outbox, n int, faults *crashAt) error {
	for i := 0; i < n; i++ {
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
			faults.Hit("producer.after-commit")
		}
	}
	return nil
}

var errRollback = errors.New("business rule said no")
