package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/pipetx"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// Tx is the part of a pgx transaction Enqueue needs; pgx.Tx satisfies it.
type Tx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Aggregate names what an event is about; rows of one aggregate are
// published in the order they were enqueued.
type Aggregate struct {
	Type string
	ID   string
}

// Item is one envelope to enqueue with the aggregate it belongs to.
type Item struct {
	Aggregate Aggregate
	Envelope  envelope.Envelope
}

// Outbox validates envelopes against the registry and stores them.
type Outbox struct {
	reg      *registry.Registry
	limits   []Limit // see WithLimits
	metrics  *telemetry.Metrics
	codec    fabric.Codec // see WithCodec
	exchange string
	wake     func(rows int) // see WithWake; nil: NOTIFY
}

// New returns an Outbox validating with reg.
func New(reg *registry.Registry) *Outbox { return &Outbox{reg: reg} }

// WithCodec returns an Outbox whose Enqueue encodes envelopes with c (a
// topology's wire format, package codec) for exchange (its events
// exchange; empty routes by kind), keeping the limits of WithLimits. The
// relay publishes the codec's body, routing key and properties as stored.
func (o *Outbox) WithCodec(c fabric.Codec, exchange string) *Outbox {
	out := *o
	out.codec, out.exchange = c, exchange
	return &out
}

// WithWake returns an Outbox whose Enqueue calls wake (a relay in this
// process: Relay.Expect) instead of queueing a NOTIFY, keeping the codec
// and limits. PostgreSQL serializes the commits of every transaction that
// notified, WAL flush included, on one lock for the whole cluster: at 200
// requests/s the commits of the request and communication services queued
// on it. Without NOTIFY, a relay in another process hears of these rows by
// its poll only; the relay in this one polls briefly until they commit.
func (o *Outbox) WithWake(wake func(rows int)) *Outbox {
	out := *o
	out.wake = wake
	return &out
}

// Enqueue inserts items into outbox_event (resolved through the
// transaction's search_path) inside tx. Each envelope is validated against
// its schema and encoded now, so the relay publishes exactly these bytes.
// The trace context of ctx travels with the row, so consumers' spans join
// the trace that produced the event. It returns registry or envelope
// validation errors, a *throttledError over a publish limit (WithLimits),
// or the database error. In a transaction that defers writes (pipetx.Tx,
// what the inbox hands consumers) the rows travel with its next statement
// or its COMMIT, and a database error surfaces there.
//
// Call it after the aggregate's own row is written (and so locked): that
// makes the outbox order of one aggregate its commit order.
func (o *Outbox) Enqueue(ctx context.Context, tx Tx, items ...Item) error {
	if len(items) == 0 {
		return nil
	}
	if err := o.admit(ctx, items); err != nil {
		return err
	}
	// A transaction that defers writes (pipetx) carries the rows with its
	// next statement or its COMMIT: no round trip of their own. They are
	// handed over only once every item is encoded, so a refused item
	// leaves nothing queued.
	deferrer, deferring := tx.(pipetx.Deferrer)
	b := &pgx.Batch{}
	for _, it := range items {
		e := it.Envelope
		if it.Aggregate.Type == "" || it.Aggregate.ID == "" {
			return fmt.Errorf("outbox: enqueue %s: aggregate type and id are required", e.Type)
		}
		// Who acted and what about, for every producer alike: the entity
		// is the aggregate the event belongs to; the actor is the one the
		// context names (the HTTP edge's USER, an agent step's AGENT), else
		// the producing service acting on its own.
		if e.Entity == nil {
			e.Entity = &envelope.Ref{Type: it.Aggregate.Type, ID: it.Aggregate.ID}
		}
		if e.Actor == nil {
			a, ok := envelope.ActorFrom(ctx)
			if !ok {
				a = envelope.Ref{Type: "SYSTEM", ID: e.Producer}
			}
			e.Actor = &a
		}
		m, err := broker.EncodeEnvelope(o.reg, o.codec, o.exchange, e)
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		// The row keeps the AMQP properties the relay sends: the
		// correlation id always, the type when a codec's differs from
		// the row's event type.
		m.Headers[wire.StoredCorrelation] = m.CorrelationID
		if o.codec != nil {
			m.Headers[wire.StoredType] = m.Type
		}
		telemetry.Propagator().Inject(ctx, telemetry.HeaderCarrier(m.Headers))
		headers, err := json.Marshal(m.Headers)
		if err != nil {
			return fmt.Errorf("outbox: headers of %s: %w", e.ID, err)
		}
		var tenantID *string
		if e.TenantID != "" {
			tenantID = &e.TenantID
		}
		b.Queue(`INSERT INTO outbox_event
			(id, tenant_id, aggregate_type, aggregate_id, event_type, event_version, payload, body,
			 exchange, routing_key, headers, occurred_at, correlation_id, causation_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			e.ID, tenantID, it.Aggregate.Type, it.Aggregate.ID, e.Type, e.Version, string(e.Payload), m.Body,
			m.Exchange, m.RoutingKey, string(headers), e.OccurredAt, nullable(e.CorrelationID), nullable(e.CausationID))
	}
	if o.wake == nil {
		// Delivered at commit, never for a rolled-back transaction.
		b.Queue(`SELECT pg_notify('fabric_outbox_' || current_schema(), '')`)
	}
	if deferring {
		for _, q := range b.QueuedQueries {
			if err := deferrer.Defer(q.SQL, q.Arguments...); err != nil {
				return fmt.Errorf("outbox: insert: %w", err)
			}
		}
		if o.wake != nil {
			o.wake(len(items))
		}
		return nil
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("outbox: insert: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("outbox: insert: %w", err)
	}
	if o.wake != nil {
		o.wake(len(items))
	}
	return nil
}

// nullable is s, or SQL NULL when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
