// Package rig wires one system of a topology file onto the event fabric
// for the runnable examples (pkg/fabric/examples/car, …/imoveis): the
// broker with the topology applied, a Postgres schema with the fabric's
// outbox and inbox, a publisher and an outbox speaking the topology's
// codec, and consumers whose handlers run inside the inbox.
package rig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/codec"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/internal/systems"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/migrations"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Config is what an example reads from its flags and environment.
type Config struct {
	Topology    string // the topology file
	AMQPURL     string
	DatabaseURL string
	Schema      string // Postgres schema for the outbox and inbox
}

// Flags registers the flags every example has on fs (-topology, -schema,
// with the example's defaults) and returns the Config they fill; the
// broker and database are the local ones unless the environment names
// others (Config.FromEnv).
func Flags(fs *flag.FlagSet, topologyFile, schema string) *Config {
	c := &Config{AMQPURL: "amqp://guest:guest@127.0.0.1:5672/", DatabaseURL: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"}
	fs.StringVar(&c.Topology, "topology", topologyFile, "the topology file")
	fs.StringVar(&c.Schema, "schema", schema, "Postgres schema of the outbox and inbox")
	return c
}

// FromEnv takes the broker and database from AMQP_URL and DATABASE_URL
// when they are set.
func (c *Config) FromEnv(getenv func(string) string) {
	if v := getenv("AMQP_URL"); v != "" {
		c.AMQPURL = v
	}
	if v := getenv("DATABASE_URL"); v != "" {
		c.DatabaseURL = v
	}
}

// Run opens the rig of c, runs scenario on it and closes it.
func Run(ctx context.Context, c Config, stdout io.Writer, scenario func(context.Context, *Rig) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := Open(ctx, c, stdout)
	if err != nil {
		return err
	}
	err = scenario(ctx, r)
	cancel()
	return errors.Join(err, r.Close())
}

// Rig is one system on the fabric.
type Rig struct {
	Desc   topology.Description
	Codec  fabric.Codec
	Reg    *registry.Registry
	Conn   *broker.Conn
	Pool   *pgxpool.Pool
	Schema string
	Pub    *broker.Publisher
	Outbox *outbox.Outbox

	out  io.Writer
	mu   sync.Mutex // serialises printing
	wg   sync.WaitGroup
	errs chan error
}

// Open connects to the broker (declaring the topology on every
// connection), migrates the schema and starts the outbox relay, which runs
// until ctx ends. Close releases everything.
func Open(ctx context.Context, cfg Config, out io.Writer) (*Rig, error) {
	desc, err := topology.LoadFile(cfg.Topology)
	if err != nil {
		return nil, err
	}
	c, err := codec.For(desc)
	if err != nil {
		return nil, err
	}
	reg, err := systems.Registry(desc)
	if err != nil {
		return nil, err
	}
	r := &Rig{Desc: desc, Codec: c, Reg: reg, Schema: cfg.Schema, out: out, errs: make(chan error, 32)}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r.Conn, err = broker.Dial(dctx, cfg.AMQPURL, broker.Options{Name: desc.Name + "-example"},
		func(ctx context.Context, conn *amqp.Connection) error { return topology.Apply(ctx, conn, desc) })
	if err != nil {
		return nil, fmt.Errorf("broker (is RabbitMQ running? make infra): %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	pcfg.ConnConfig.RuntimeParams["search_path"] = cfg.Schema // the outbox is found through it
	if r.Pool, err = pgxpool.NewWithConfig(dctx, pcfg); err != nil {
		r.Close()
		return nil, err
	}
	if err := migrations.CreateSchema(dctx, r.Pool, cfg.Schema); err != nil {
		r.Close()
		return nil, fmt.Errorf("postgres (is it running? make infra): %w", err)
	}
	if err := migrations.Apply(dctx, r.Pool, cfg.Schema); err != nil {
		r.Close()
		return nil, err
	}
	if r.Pub, err = broker.NewPublisher(r.Conn, reg, broker.PublisherOptions{Codec: c, Exchange: desc.Events}); err != nil {
		r.Close()
		return nil, err
	}
	r.Outbox = outbox.New(reg).WithCodec(c, desc.Events)
	relay := relay.New(r.Pool, cfg.Schema, r.Pub, relay.Options{PollInterval: 100 * time.Millisecond})
	r.goRun(func() error { return relay.Run(ctx) })
	r.Printf("topology %s: codec %s, tenant %s, events on %s, dead letters via %s, retries via %s",
		desc.Name, desc.Codec, desc.Tenant, desc.Events, desc.DeadLetter.Exchange, desc.Retry.Exchange)
	return r, nil
}

func (r *Rig) goRun(f func() error) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := f(); err != nil {
			r.errs <- err
		}
	}()
}

// Printf prints one line.
func (r *Rig) Printf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

// Handler is an example's effect for one message, inside the inbox's
// transaction; attempt is 1 for a first delivery.
type Handler func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error

// Consume runs a consumer of queue until ctx ends: the topology's codec,
// the inbox (a redelivered event id is acked and skipped), the queue's
// retries and DLQ. Options not given come from the queue's topology
// (prefetch, pace).
func (r *Rig) Consume(ctx context.Context, queue string, h Handler, opts fabric.ConsumerOptions) error {
	spec, ok := r.Desc.Consumer(queue)
	if !ok {
		return fmt.Errorf("topology %s has no queue %s", r.Desc.Name, queue)
	}
	in := inbox.New(r.Pool, r.Schema, queue, inbox.Options{})
	opts.Codec = r.Codec
	c, err := broker.NewConsumer(r.Conn, r.Pub, r.Reg, spec, in.Handler(fabric.TxHandler(h)), opts)
	if err != nil {
		return err
	}
	r.goRun(func() error { return c.Run(ctx) })
	return nil
}

// Enqueue stores envelopes in the outbox in one transaction, as a
// producer's business transaction would; the relay publishes them.
func (r *Rig) Enqueue(ctx context.Context, aggregate outbox.Aggregate, envs ...envelope.Envelope) error {
	tx, err := r.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	items := make([]outbox.Item, len(envs))
	for i, e := range envs {
		items[i] = outbox.Item{Aggregate: aggregate, Envelope: e}
	}
	if err := r.Outbox.Enqueue(ctx, tx, items...); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// ShowDLQ prints and removes the letters of a DLQ with the fabric's
// headers: which consumer, why, after how many attempts.
func (r *Rig) ShowDLQ(ctx context.Context, queue string) (int, error) {
	ch, err := r.Conn.Channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	n := 0
	for {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return n, err
		}
		if !ok {
			return n, nil
		}
		n++
		r.Printf("DLQ %s: %s (message %s) from %s: %s after %v attempt(s): %v", queue, d.Type, d.MessageId,
			d.Headers[wire.HeaderConsumer], d.Headers[wire.HeaderReason], d.Headers[wire.HeaderAttempts], d.Headers[wire.HeaderError])
		if err := d.Ack(false); err != nil {
			return n, err
		}
	}
}

// Depth returns how many messages queue holds ready (a passive declare).
func (r *Rig) Depth(ctx context.Context, queue string) (int, error) {
	ch, err := r.Conn.Channel(ctx)
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	return q.Messages, nil
}

// Wait blocks until cond holds (polled), ctx ends or timeout passes, or a
// relay or consumer fails.
func (r *Rig) Wait(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case err := <-r.errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
	return nil
}

// Close waits for the consumers and relay (whose ctx the caller cancelled)
// and closes the publisher, pool and connection.
func (r *Rig) Close() error {
	r.wg.Wait()
	close(r.errs)
	var errs []error
	for err := range r.errs {
		errs = append(errs, err)
	}
	if r.Pub != nil {
		r.Pub.Close()
	}
	if r.Pool != nil {
		r.Pool.Close()
	}
	if r.Conn != nil {
		r.Conn.Close()
	}
	return errors.Join(errs...)
}

// Counter counts events by name, safely across handlers.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts one of name and returns how many there are now.
func (c *Counter) Add(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	return c.n[name]
}

// Get returns the count of name.
func (c *Counter) Get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}
