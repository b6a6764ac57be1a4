package fabric

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// Handler processes one validated envelope. ctx carries the tenant (see
// package tenant) and the trace of the publisher. Returning nil acks the
// message; an error is classified with ClassOf to retry or dead-letter it.
type Handler func(ctx context.Context, env envelope.Envelope) error

// TxHandler applies one message's effect inside tx, the transaction in
// which the consumer's inbox claims the envelope's id (package inbox; the
// host's ConsumeTx): the effect and the claim commit together, so a
// redelivered message has its effect once. tx is scoped to the envelope's
// tenant for row-level security. Returning an error rolls both back; the
// error is classified with ClassOf, as a Handler's is.
type TxHandler func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error

// Received is one admitted message of a batch: its envelope and the context
// its effect must run under (tenant, the publisher's trace, its own span).
type Received struct {
	Ctx context.Context
	Env envelope.Envelope
}

// BatchHandler processes the messages one handler goroutine took from the
// queue at once (up to MaxBatch, never waiting for more) and returns one
// error per message, in order: nil acks it, an error is classified with
// ClassOf for that message alone. Nothing is acked before it returns, so a
// handler that commits the batch in one transaction has committed before
// any ack leaves.
type BatchHandler func(ctx context.Context, batch []Received) []error

// ConsumerOptions tune a Consumer. The zero value is usable.
type ConsumerOptions struct {
	// Prefetch is the broker-side window of unacked deliveries (default 32).
	Prefetch int
	// Concurrency is the number of handlers running at once (default 4).
	Concurrency int
	// MaxBatch is the most deliveries a BatchHandler gets at once (default
	// 16). A batch takes what is already prefetched: it never waits to fill,
	// so it adds no latency when the queue is quiet. Per-message consumers
	// ignore it.
	MaxBatch int
	// UnknownRetries caps retries of unclassified errors (default 2; never
	// more than the consumer's retry tiers).
	UnknownRetries int
	// MaxDepth is the reaction-depth limit (default 16).
	MaxDepth int
	// MaxSize is the largest envelope accepted (default 1 MiB).
	MaxSize int
	// ShutdownTimeout bounds how long Run waits for in-flight handlers after
	// its context ends before cancelling theirs (default 30 s).
	ShutdownTimeout time.Duration
	// OutageHold bounds how long the consumer keeps a message whose
	// handler found a dependency down (ErrUnavailable), trying it again
	// after pauses of 1 s doubling to 30 s, before it puts the message back
	// on its queue, in place, to be delivered again (default 10 min: under
	// the broker's 30-minute acknowledgement timeout). The pauses scale
	// with the hold (1/600 and 1/20 of it). An outage of any length costs
	// one redelivery per hold, never a retry tier: an hour costs 6 of the
	// queue's delivery limit (10 by default) with the default hold.
	OutageHold time.Duration
	// DepthInterval is how often the queue's depth (and its retry tiers')
	// is read for the fabric.consumer.queue_depth and retry_depth gauges
	// (default 10 s); while every count is zero the reads back off to six
	// times it, and the first message seen brings them back.
	DepthInterval time.Duration
	// Pace, when set, is waited on before each handler call (package
	// ratelimit): the consumer is paced, never dropping anything; a message
	// waits in the prefetch window and the queue. Waits are recorded in
	// fabric.consumer.pace_wait.
	Pace pacer
	// Simulatable declares that the handler's every effect is in its
	// transaction (rows and outbox: no mail, no object storage, no call
	// out), so a replay from history may run it in SIMULATION, inside a
	// transaction that is rolled back (package replay; host.ConsumeTx).
	// The consumer itself ignores it.
	Simulatable bool
	// Codec reads the wire format of the queue's messages into the
	// envelope (package codec; codec.For(description)). Nil is the
	// platform's own envelope: the body decoded as it is, and its tenant
	// checked against the x-tenant-id header.
	Codec Codec
	// Release is the release id the service runs, told to handlers
	// through ExecutionOf (default "dev"; the host gives its RELEASE_ID).
	Release string
	// Tag names the consumer on the broker (default <queue>-<random>).
	Tag     string
	Tracer  trace.TracerProvider
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
}

// pacer paces a consumer: Wait blocks until the next message may be
// handled, or ctx ends (ratelimit.Local and ratelimit.Shared).
type pacer interface {
	Wait(ctx context.Context) error
}
