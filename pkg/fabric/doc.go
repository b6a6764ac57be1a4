// Package fabric is what a service's message handling is written against:
// handlers (Handler, BatchHandler), their options, Decode, and the failure
// classes and error kinds that decide a message's fate. Domain code sees
// envelopes, handlers and errors; it never touches an AMQP channel. The
// engine under it — confirmed publishing, supervised consuming, retry tiers
// and per-consumer dead-letter queues over RabbitMQ — is package broker,
// which the service host (package host) runs.
//
// # The five things a service author does
//
// Publish in a transaction. A fact and its event commit together: the
// service writes its row and enqueues the envelope in the same database
// transaction (package outbox), and the relay the service host runs
// publishes it with publisher confirms after the commit. Application code
// does not publish to the broker directly.
//
//	err := tenant.Tx(ctx, pool, tenantID, func(tx pgx.Tx) error {
//		// ... write the request row ...
//		e, err := envelope.New("request.submitted.v1", tenantID, "request", payload)
//		if err != nil {
//			return err
//		}
//		return ob.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: id}, Envelope: e})
//	})
//
// Consume with the inbox. A queue is declared in the catalog
// (catalog/catalog.yaml, services:) and attached in the service's main; a
// transactional handler runs in the same transaction as the claim of the
// envelope's id, so a redelivered message is acknowledged without running
// its effect twice (package inbox):
//
//	h.ConsumeTx("analytics.request-events", func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
//		tenantID, p, err := fabric.Decode[payload.RequestSubmitted](ctx, env)
//		if err != nil {
//			return err // Invalid: dead-lettered at once, with the reason
//		}
//		return store.Count(ctx, tx, tenantID, p)
//	}, fabric.ConsumerOptions{})
//
// A handler of any kind (a TxHandler's ctx, each Received.Ctx of a batch)
// and a host worker ask what they run in with ExecutionOf(ctx): the
// principal the work is for (the envelope's actor; without one, its
// producer as SYSTEM), the correlation and causation, the entity, the
// release the service runs (RELEASE_ID), and, when the envelope carries
// them, the workflow step and the knowledge version it derives from. The
// consumer fills it before the handler runs; a handler reads it rather
// than piecing it together from the envelope or its own configuration:
//
//	x := fabric.ExecutionOf(ctx)
//	rec.Release = x.Release // the release that made this decision
//
// Classify a failure. What a handler returns decides the message's fate:
// nil acknowledges it; Transient (a dependency is down) goes through the
// retry tiers Q.retry.<n> and then to the DLQ Q.dlq; Permanent (a business
// rule refuses it) and Invalid (the message is malformed) go to the DLQ at
// once; an unclassified error is retried a few times, then dead-lettered.
// WithReason names the reason a DLQ shows. See ExampleClassOf. An error
// that wraps one of the fabric's kinds (ErrInvalid, ErrNotFound,
// ErrConflict) has that kind's class unless marked otherwise, and the HTTP
// edge answers it with that kind's status (problem.Fail): a service's
// domain errors wrap a kind once, and no handler maps them by hand.
//
// Replay a dead letter. Dead letters are inspected, masked by sensitivity,
// and replayed or purged with an audit row, by an operator: `fabricctl dlq`
// or the /v1/dlq/ API every consuming service serves. A replayed letter
// goes back to its own queue only (through platform.retry with the queue's
// name as key), never to the other consumers of the event.
//
// Add an event type. Four hand-written files: the schema, the catalog
// entry, the producer's call and the consumer's handler; `make generate`
// derives the topology, broker grants and AsyncAPI document
// (docs/how-to.md, and e2e/addevent, which does it in a scratch copy).
//
// # Delivery guarantees
//
// At least once from the outbox to each consumer queue; effectively once
// for effects that live in the consumer's database (the inbox). A publish
// that returns an error was not confirmed and must be treated as not sent.
// A consumer acknowledges only after its handler returned and, for
// transactional handlers, after the commit.
package fabric
