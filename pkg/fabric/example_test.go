package fabric_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// The examples run against the real broker and database, like the tests
// (AMQP_URL, DATABASE_URL; `make infra`). exampleT hands the test helpers
// the testing.TB they want: a failure panics, since an Example has no T to
// fail, and cleanups run when the example returns.
type exampleT struct {
	testing.TB // nil: the helpers call only the methods below
	cleanups   []func()
}

func (e *exampleT) Helper()                   {}
func (e *exampleT) Name() string              { return "example" }
func (e *exampleT) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) Fatal(a ...any)            { panic(fmt.Sprint(a...)) }
func (e *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleT) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleT) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// auditQueue is the examples' consumer: one queue bound to one event type.
func auditQueue(name string) topology.Consumer {
	return topology.Consumer{Queue: name, Service: "example",
		Bindings: []topology.Binding{{Exchange: topology.EventsExchange, Key: "request.submitted.v1"}}}
}

func exampleSubmitted(tenantID string) envelope.Envelope {
	e, err := envelope.New("request.submitted.v1", tenantID, "request", payload.RequestSubmitted{
		RequestID: "0190f1c2-7d4e-7a00-8000-0000000000aa", Protocol: "REQ-2026-000001", ServiceID: "permit",
		FormID: "permit-form", FormVersion: 1, Channel: enum.Of[payload.Channel]("web"), CitizenID: "citizen-1", SubmittedAt: time.Now().UTC()})
	if err != nil {
		panic(err)
	}
	return e
}

// A handler's error decides what happens to the message: its class.
func ExampleClassOf() {
	errDown := errors.New("object store unreachable")
	for _, err := range []error{
		fabric.Transient(fmt.Errorf("store document: %w", errDown)), // retried through the tiers, then the DLQ
		fabric.Permanent(errors.New("request already closed")),      // no retry: the DLQ
		fabric.Invalid(errors.New("payload is not JSON")),           // the DLQ at once
		errors.New("something nobody classified"),                   // a few retries, then the DLQ
	} {
		fmt.Println(fabric.ClassOf(err))
	}
	// Output:
	// transient
	// permanent
	// invalid
	// unknown
}

// Publish in a transaction: the envelope is stored with the fact it
// reports, in one commit, and the relay (which the service host runs)
// publishes it with confirms afterwards.
func Example_publishInATransaction() {
	t := &exampleT{}
	defer t.close()
	env := fabrictest.EnvFrom(os.Getenv)
	db := fabrictest.NewSchema(t, env)
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(),
		Consumers: []topology.Consumer{auditQueue("example.audit")}})
	ctx := context.Background()

	ob := outbox.New(f.Reg)
	err := tenant.Tx(ctx, db.Pool, "org-a", func(tx pgx.Tx) error {
		// ... the service writes its own rows in tx here ...
		return ob.Enqueue(ctx, tx, outbox.Item{
			Aggregate: outbox.Aggregate{Type: "request", ID: "0190f1c2-7d4e-7a00-8000-0000000000aa"},
			Envelope:  exampleSubmitted("org-a"),
		})
	})
	if err != nil {
		panic(err)
	}

	relay := relay.New(db.Pool, db.Name, f.Pub, relay.Options{PollInterval: 50 * time.Millisecond})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	fabrictest.WaitOutboxPublished(t, db.Pool, "request.submitted.v1", "")
	stop()
	<-done

	for _, d := range f.Drain(t, "example.audit") {
		e, err := envelope.Decode(d.Body, envelope.DefaultMaxSize)
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Type, "for", e.TenantID)
	}
	// Output: request.submitted.v1 for org-a
}

// Consume with the inbox: the handler's effect and the claim of the
// envelope's id commit together, so a message delivered twice has its
// effect once.
func Example_consumeWithTheInbox() {
	t := &exampleT{}
	defer t.close()
	env := fabrictest.EnvFrom(os.Getenv)
	db := fabrictest.NewSchema(t, env)
	spec := auditQueue("example.counter")
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE seen (id text, tenant_id text)`); err != nil {
		panic(err)
	}

	handled := make(chan string, 3)
	in := inbox.New(db.Pool, db.Name, spec.Queue, inbox.Options{})
	f.Run(t, spec, in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		tenantID, err := tenant.From(ctx)
		if err != nil {
			return fabric.Invalid(err)
		}
		if _, err = tx.Exec(ctx, `INSERT INTO seen VALUES ($1, $2)`, e.ID, tenantID); err != nil {
			return err
		}
		handled <- e.ID
		return nil
	}), fabric.ConsumerOptions{Prefetch: 1, Concurrency: 1}) // one at a time, in order

	e, marker := exampleSubmitted("org-b"), exampleSubmitted("org-b")
	// The same envelope twice, as a redelivery would bring it, then another:
	// once the other's effect is in, both copies have been through.
	for _, m := range []envelope.Envelope{e, e, marker} {
		if err := f.Pub.Publish(ctx, m); err != nil {
			panic(err)
		}
	}
	for id := range handled {
		if id == marker.ID {
			break
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM seen WHERE id = $1`, e.ID).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("effects:", n)
	// Output: effects: 1
}

// Replay a dead letter: a handler refused a message (Permanent), so it
// waits in its queue's DLQ; once the cause is fixed an operator replays it
// (`fabricctl dlq replay`, or POST /v1/dlq/replay on the consuming
// service, both of which do this), with an audit row saying who and why,
// and it returns to that consumer's queue alone.
func Example_replayADeadLetter() {
	t := &exampleT{}
	defer t.close()
	env := fabrictest.EnvFrom(os.Getenv)
	db := fabrictest.NewSchema(t, env)
	spec := auditQueue("example.fragile")
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	ctx := context.Background()

	fixed := make(chan bool, 1)
	fixed <- false
	got := make(chan string, 1)
	stopConsumer := f.Run(t, spec, func(ctx context.Context, e envelope.Envelope) error {
		ok := <-fixed
		fixed <- true
		if !ok {
			return fabric.Permanent(errors.New("no permit type 'kiosk' yet"))
		}
		got <- e.ID
		return nil
	}, fabric.ConsumerOptions{})
	defer stopConsumer()

	e := exampleSubmitted("org-c")
	if err := f.Pub.Publish(ctx, e); err != nil {
		panic(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "the letter in the DLQ", func() bool { return f.Depth(t, spec.DLQ()) == 1 })

	ops := dlq.New(f.Conn, f.Pub, f.Reg, db.Pool, db.Name).For(spec)
	report, err := ops.Replay(ctx, dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{IDs: []string{e.ID}},
		Operator: "ana", Reason: "permit type kiosk added"})
	if err != nil {
		panic(err)
	}
	fmt.Println("replayed:", report.Succeeded)
	fmt.Println("handled the same message:", <-got == e.ID)
	// Output:
	// replayed: 1
	// handled the same message: true
}

// Add an event type: after its schema and catalog entry, the registry
// checks its envelopes and the platform topology routes it to the queues
// whose services declared it (here an existing type and queue).
func Example_addAnEventType() {
	reg, err := registry.Default()
	if err != nil {
		panic(err)
	}
	def, _ := reg.Lookup("request.cancelled.v1")
	exchange, key := topology.Route(def)
	fmt.Println(def.Kind, "on", exchange, "with key", key)

	c, _ := topology.Platform().Consumer("workflow.request-cancelled")
	fmt.Println(c.Queue, "binds", c.Bindings[0].Key, "retries in", c.RetryQueue(1), "dead-letters to", c.DLQ())
	// Output:
	// event on platform.events with key request.cancelled.v1
	// workflow.request-cancelled binds request.cancelled.v1 retries in workflow.request-cancelled.retry.1 dead-letters to workflow.request-cancelled.dlq
}
