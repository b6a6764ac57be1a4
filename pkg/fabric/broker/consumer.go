package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/agora-platform/agora/pkg/fabric/text"
	"log/slog"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/execution"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Consumer consumes one queue with manual acks. Several Consumers (in one
// process or many) on the same queue compete for its messages.
type Consumer struct {
	conn    *Conn
	pub     *Publisher
	reg     *registry.Registry
	spec    topology.Consumer
	tiers   []time.Duration
	h       fabric.Handler
	bh      fabric.BatchHandler
	opts    fabric.ConsumerOptions
	tracer  trace.Tracer
	metrics *telemetry.Metrics
	log     *slog.Logger
	depth   atomic.Int64
	// retryDepth is the messages waiting in the consumer's retry tiers:
	// a backlog too, which the queue's own depth does not show.
	retryDepth atomic.Int64
}

// NewConsumer returns a consumer of spec.Queue running h: a Handler, one
// message at a time, or a BatchHandler, which takes what the prefetch
// window holds at once (up to MaxBatch), so that under load one
// transaction and one commit serve many messages while a quiet queue still
// gets batches of one. pub sends retries and dead letters (with confirms)
// before the original is acked.
func NewConsumer[H handlerFunc](conn *Conn, pub *Publisher, reg *registry.Registry, spec topology.Consumer, h H, opts fabric.ConsumerOptions) (*Consumer, error) {
	// H is one of two function shapes, under any name: convert it to the
	// fabric's own type of that shape.
	v := reflect.ValueOf(h)
	if v.IsNil() {
		return nil, errors.New("fabric: NewConsumer needs a handler")
	}
	if t := reflect.TypeFor[fabric.Handler](); v.Type().ConvertibleTo(t) {
		return newConsumer(conn, pub, reg, spec, v.Convert(t).Interface().(fabric.Handler), nil, opts)
	}
	return newConsumer(conn, pub, reg, spec, nil, v.Convert(reflect.TypeFor[fabric.BatchHandler]()).Interface().(fabric.BatchHandler), opts)
}

// handlerFunc is what NewConsumer runs: a Handler or a BatchHandler, named
// or written as a function literal.
type handlerFunc interface {
	~func(context.Context, envelope.Envelope) error | ~func(context.Context, []fabric.Received) []error
}

func newConsumer(conn *Conn, pub *Publisher, reg *registry.Registry, spec topology.Consumer, h fabric.Handler, bh fabric.BatchHandler, opts fabric.ConsumerOptions) (*Consumer, error) {
	if conn == nil || pub == nil || reg == nil {
		return nil, errors.New("fabric: a consumer needs a connection, publisher and registry")
	}
	if spec.Queue == "" {
		return nil, errors.New("fabric: NewConsumer: queue name is empty")
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = spec.Prefetch
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = 32
	}
	if opts.Pace == nil && spec.Pace != nil {
		burst := spec.Pace.Burst
		if burst <= 0 {
			burst = 1
		}
		opts.Pace = ratelimit.NewLocal(spec.Pace.PerSecond, burst)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 16
	}
	if opts.UnknownRetries <= 0 {
		opts.UnknownRetries = 2
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.OutageHold <= 0 {
		opts.OutageHold = 10 * time.Minute
	}
	if opts.DepthInterval <= 0 {
		opts.DepthInterval = 10 * time.Second
	}
	if opts.Release == "" {
		opts.Release = "dev"
	}
	if opts.Tag == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.Tag = spec.Queue + "-" + hex.EncodeToString(b[:])
	}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := opts.Metrics
	if m == nil {
		var err error
		if m, err = telemetry.NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	c := &Consumer{
		conn: conn, pub: pub, reg: reg, spec: spec, tiers: spec.Tiers(), h: h, bh: bh, opts: opts,
		tracer: tp.Tracer("github.com/agora-platform/agora/pkg/fabric"), metrics: m,
		log: log.With("consumer", spec.Queue),
	}
	if _, err := m.Meter.Int64ObservableGauge("fabric.consumer.queue_depth",
		metric.WithDescription("Messages ready in the consumer's queue (read every DepthInterval)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(c.depth.Load(), metric.WithAttributes(attribute.String("consumer", spec.Queue)))
			return nil
		})); err != nil {
		return nil, fmt.Errorf("fabric: queue depth gauge: %w", err)
	}
	if _, err := m.Meter.Int64ObservableGauge("fabric.consumer.retry_depth",
		metric.WithDescription("Messages waiting in the consumer's retry tiers (read every DepthInterval)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(c.retryDepth.Load(), metric.WithAttributes(attribute.String("consumer", spec.Queue)))
			return nil
		})); err != nil {
		return nil, fmt.Errorf("fabric: retry depth gauge: %w", err)
	}
	return c, nil
}

// watchDepth reads the queue's and its retry tiers' ready-message counts
// until ctx ends, on a channel of its own kept open between reads (a failed
// passive declare closes it; the next read opens another). While every
// count is zero the reads back off, doubling from DepthInterval up to
// maxDepthBackoff times it, and any message seen brings them back to
// DepthInterval: an idle platform's many consumers otherwise asked the
// broker about every queue and tier every 10 s, each time on a new channel.
// A backlog that builds after a long quiet shows at most that much later.
func (c *Consumer) watchDepth(ctx context.Context) {
	var ch *amqp.Channel
	defer func() {
		if ch != nil {
			ch.Close()
		}
	}()
	wait := c.opts.DepthInterval
	for {
		if ch == nil || ch.IsClosed() {
			ch = nil
			if opened, err := c.conn.Channel(ctx); err == nil {
				ch = opened
			}
		}
		busy := true // unknown counts as busy: keep reading at DepthInterval
		if ch != nil {
			depth, ok := passiveDepth(ch, c.spec.Queue)
			if ok {
				c.depth.Store(depth)
			}
			retry, retryOK := c.readRetryDepth(ctx, &ch)
			c.retryDepth.Store(retry)
			busy = !ok || !retryOK || depth > 0 || retry > 0
		}
		if busy {
			wait = c.opts.DepthInterval
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !busy {
			wait = min(wait*2, maxDepthBackoff*c.opts.DepthInterval)
		}
	}
}

// maxDepthBackoff bounds the idle depth reads' interval, in DepthIntervals
// (by default 10 s × 6: a minute).
const maxDepthBackoff = 6

// passiveDepth reads a queue's ready messages; false when it could not
// (the channel is then closed).
func passiveDepth(ch *amqp.Channel, queue string) (int64, bool) {
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, false
	}
	return int64(q.Messages), true
}

// readRetryDepth sums the ready messages of the consumer's retry queues on
// *ch, opening another channel after a tier that cannot be read (its
// passive declare closed the channel); that tier counts nothing this time
// and ok is false.
func (c *Consumer) readRetryDepth(ctx context.Context, ch **amqp.Channel) (n int64, ok bool) {
	ok = true
	for i := range c.tiers {
		if *ch == nil || (*ch).IsClosed() {
			opened, err := c.conn.Channel(ctx)
			if err != nil {
				*ch = nil
				return n, false
			}
			*ch = opened
		}
		depth, read := passiveDepth(*ch, c.spec.RetryQueue(i+1))
		n += depth
		ok = ok && read
	}
	return n, ok
}

// Run consumes until ctx ends, resubscribing after every connection or
// channel loss. On cancellation it stops taking deliveries, lets in-flight
// handlers finish (up to ShutdownTimeout), lets their acks reach the broker
// and returns nil. Unacked messages return to the queue: nothing is lost.
// Every goroutine Run starts has ended when it returns.
func (c *Consumer) Run(ctx context.Context) error {
	// Handlers outlive a cancelled Run ctx so a shutdown does not fail work
	// half done; hardStop cuts them off after ShutdownTimeout.
	handlerCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	// Run can also return with ctx live (the connection was closed for
	// good): the watcher gets a ctx of its own to stop it then.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	watcher.Go(func() { c.watchDepth(watchCtx) })
	defer watcher.Wait()
	defer stopWatch()
	for {
		if ctx.Err() != nil {
			return nil
		}
		err := c.session(ctx, handlerCtx, hardStop)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrClosed) {
			return fmt.Errorf("consumer %s: %w", c.spec.Queue, err)
		}
		c.log.Warn("consumer session ended, resubscribing", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Consumer) session(ctx, handlerCtx context.Context, hardStop context.CancelFunc) error {
	ch, err := c.conn.Channel(ctx)
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(c.opts.Prefetch, 0, false); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	deliveries, err := ch.Consume(c.spec.Queue, c.opts.Tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", c.spec.Queue, err)
	}
	var wg sync.WaitGroup
	for range c.opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range deliveries {
				if c.bh == nil {
					c.process(handlerCtx, ctx, d)
					continue
				}
				c.processBatch(handlerCtx, ctx, takeBatch(d, deliveries, c.opts.MaxBatch))
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	select {
	case <-finished:
		// The delivery channel closed: the channel or connection died.
		// Unacked messages go back to the queue; the inbox absorbs repeats.
		return errors.New("delivery channel closed")
	case <-ctx.Done():
	}
	// Stop new deliveries; prefetched ones still in the channel are handled.
	if err := ch.Cancel(c.opts.Tag, false); err != nil {
		c.log.Warn("cancel consumer", "err", err)
	}
	select {
	case <-finished:
	case <-time.After(c.opts.ShutdownTimeout):
		c.log.Error("handlers still running after shutdown timeout; cancelling them")
		hardStop()
		<-finished
	}
	// Closing right after the last ack can lose acks, and no AMQP reply
	// says when they are safe: a quorum queue's channel holds acks back
	// while 32 or more of its commands await the queue, and drops them if
	// it closes first (rabbitmq-server#10327). basic.qos-ok is no barrier
	// (the channel answers it at once); basic.get is one, but takes a
	// message. So the queue gets time to catch up: without the pause tens
	// to hundreds of 2,000 acks are lost, with a qos round trip instead
	// as many (TestShutdownRightAfterABurstOfAcksLosesNone). The inbox
	// absorbs whatever still comes back.
	time.Sleep(100 * time.Millisecond)
	return nil
}

func headerString(h amqp.Table, k string) string {
	s, _ := h[k].(string)
	return s
}

// refusal is a message the fabric rejects before any handler runs.
type refusal struct {
	reason string
	err    error
}

// admit decodes and checks a delivery. It returns the envelope or why it
// must go to the DLQ at once.
func (c *Consumer) admit(d amqp.Delivery) (envelope.Envelope, *refusal) {
	env, err := c.decode(d)
	if err != nil {
		return env, &refusal{wire.ReasonInvalidEnvelope, err}
	}
	if _, err := c.reg.CheckIncoming(env); err != nil {
		return env, &refusal{checkReason(err), err}
	}
	if err := routedAsTyped(d, env, c.opts.Codec); err != nil {
		return env, &refusal{wire.ReasonTypeNotRouted, err}
	}
	if h := headerString(d.Headers, wire.HeaderTenant); h != env.TenantID && !suppliesTenant(c.opts.Codec) {
		return env, &refusal{wire.ReasonTenantMismatch,
			fmt.Errorf("header %s=%q, envelope tenantId=%q", wire.HeaderTenant, h, env.TenantID)}
	}
	if err := env.CheckCausation(c.opts.MaxDepth); err != nil {
		switch {
		case errors.Is(err, envelope.ErrReactionDepth):
			return env, &refusal{wire.ReasonDepth, err}
		case errors.Is(err, envelope.ErrCausationCycle):
			return env, &refusal{wire.ReasonCycle, err}
		default:
			return env, &refusal{wire.ReasonInvalidEnvelope, err}
		}
	}
	return env, nil
}

// routedAsTyped checks the envelope's type against what the broker
// authorised: on the platform's exchanges a message's routing key is its
// type (topology.Route), and each service's topic permissions allow it
// only the keys of the types it publishes. A body that claims another type
// was labelled by a publisher not allowed to send it. A retry or replay
// arrives through the retry exchange with the key of its queue; its first
// delivery's exchange and key, kept in its headers by the consumer, are
// checked instead. Other wire formats (a codec) key by their own rules.
func routedAsTyped(d amqp.Delivery, env envelope.Envelope, codec fabric.Codec) error {
	if codec != nil {
		return nil
	}
	exchange, key := d.Exchange, d.RoutingKey
	if orig := headerString(d.Headers, wire.HeaderOrigExchange); orig != "" {
		exchange, key = orig, headerString(d.Headers, wire.HeaderOrigRouting)
	}
	switch exchange {
	case topology.EventsExchange, topology.CommandsExchange, topology.WorkExchange:
		if key != env.Type {
			return fmt.Errorf("the body says %s, the broker routed it as %s on %s", env.Type, key, exchange)
		}
	}
	return nil
}

// suppliesTenant reports whether c's format carries no tenant, so that c
// supplies the topology's fixed one and no x-tenant-id header is expected.
func suppliesTenant(c fabric.Codec) bool {
	fixed, ok := c.(interface{ FixedTenant() string })
	return ok && fixed.FixedTenant() != ""
}

// decode reads the delivery's envelope: with the consumer's codec, or as
// the platform's own envelope.
func (c *Consumer) decode(d amqp.Delivery) (envelope.Envelope, error) {
	if c.opts.Codec == nil {
		return envelope.Decode(d.Body, c.opts.MaxSize)
	}
	limit := c.opts.MaxSize
	if limit <= 0 {
		limit = envelope.DefaultMaxSize
	}
	if len(d.Body) > limit {
		return envelope.Envelope{}, fmt.Errorf("envelope too large: %d bytes, limit %d", len(d.Body), limit)
	}
	return c.opts.Codec.Decode(d)
}

// checkReason is the dead-letter reason for an error of
// registry.CheckIncoming.
func checkReason(err error) string {
	switch {
	case errors.Is(err, registry.ErrUnknownType):
		return wire.ReasonUnknownType
	case errors.Is(err, registry.ErrSchema):
		return wire.ReasonSchema
	case missingField(err, "tenantId"):
		return wire.ReasonTenantMissing
	default:
		return wire.ReasonInvalidEnvelope
	}
}

// takeBatch returns first and whatever else deliveries holds right now, up
// to max in all. It never waits for the broker: batching only happens when
// messages are already in the client. The client hands them over one at a
// time through an unbuffered channel, so before calling the batch complete
// it yields once to let the client's goroutine offer the next one.
func takeBatch(first amqp.Delivery, deliveries <-chan amqp.Delivery, max int) []amqp.Delivery {
	batch := []amqp.Delivery{first}
	yielded := false
	for len(batch) < max {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return batch
			}
			batch = append(batch, d)
			yielded = false
		default:
			if yielded {
				return batch
			}
			runtime.Gosched()
			yielded = true
		}
	}
	return batch
}

// inFlight is an admitted delivery whose handler is running.
type inFlight struct {
	d     amqp.Delivery
	env   envelope.Envelope
	ctx   context.Context
	span  trace.Span
	start time.Time
	typ   string
}

// begin admits d: a refused message is dead-lettered at once and begin
// returns nil; otherwise the message's context (tenant, trace) and span.
func (c *Consumer) begin(ctx context.Context, d amqp.Delivery) *inFlight {
	start := time.Now()
	typ := d.Type
	env, ref := c.admit(d)
	if env.Type != "" {
		typ = env.Type
	}
	if !d.Timestamp.IsZero() {
		c.metrics.Lag.Record(ctx, max(0, start.Sub(d.Timestamp).Seconds()), telemetry.Attrs(c.spec.Queue, typ))
	}
	if ref != nil {
		c.metrics.Failed.Add(ctx, 1, telemetry.Attrs(c.spec.Queue, typ, attribute.String("class", string(fabric.ClassInvalid))))
		c.deadLetter(ctx, d, env.ID, fabric.ClassInvalid, ref.reason, ref.err)
		return nil
	}
	ctx = telemetry.Propagator().Extract(ctx, telemetry.HeaderCarrier(d.Headers))
	ctx, span := c.tracer.Start(ctx, "process "+env.Type, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "rabbitmq"),
			attribute.String("messaging.destination.name", c.spec.Queue),
			attribute.String("messaging.message.id", env.ID),
			attribute.String("messaging.message.conversation_id", env.CorrelationID),
			attribute.String("agora.tenant", env.TenantID),
		))
	if env.TenantID != "" {
		ctx = tenant.With(ctx, env.TenantID)
	}
	m := &inFlight{d: d, env: env, span: span, start: start, typ: typ}
	// What the handler may ask of its execution (fabric.ExecutionOf):
	// derived from the envelope when asked, so a handler that never asks
	// costs one context value.
	m.ctx = execution.With(ctx, execution.Run{Env: &m.env, Service: c.spec.Service, Release: c.opts.Release})
	return m
}

func (c *Consumer) process(ctx, stop context.Context, d amqp.Delivery) {
	m := c.begin(ctx, d)
	if m == nil || !c.pace(m) {
		return
	}
	errs := []error{c.call(m.ctx, m.env)}
	c.waitOut(stop, []*inFlight{m}, errs, func([]*inFlight) []error { return []error{c.call(m.ctx, m.env)} })
	if errs[0] != errGivenBack {
		c.settle(m, errs[0])
	}
}

// unavailable is the class of fabric.ErrUnavailable: a dependency's outage.
var unavailable = fabric.ClassOf(fabric.ErrUnavailable)

// errGivenBack stands for a message waitOut put back on its queue: there
// is nothing left to settle.
var errGivenBack = errors.New("given back to the queue")

// outagePauses returns the first and the longest pause between calls of
// a message kept through an outage: 1 s and 30 s for the default 10-minute
// hold, in proportion for others, so that a hold always spans the same
// number of calls and a test with a hold of a second plays out an hour's
// outage as a deployment would live it, in seconds.
func outagePauses(hold time.Duration) (first, longest time.Duration) {
	return max(hold/600, time.Millisecond), max(hold/20, time.Millisecond)
}

// waitOut keeps the messages of ms whose errs say a dependency is down
// (fabric.ErrUnavailable) and calls again on them through again after a
// pause that doubles up to a twentieth of OutageHold (outagePauses), until
// they get another answer, writing each answer into errs. The consumer takes nothing new meanwhile
// beyond its prefetch window, and the messages keep their place: an
// outage costs no retry tier and sends nothing to the DLQ, however long
// it lasts. When the consumer stops, or a message has been held for
// OutageHold (the broker closes a channel that holds a delivery
// unacknowledged for 30 minutes), the messages still waiting are put back
// on the queue (a redelivery) and their errs become errGivenBack.
func (c *Consumer) waitOut(stop context.Context, ms []*inFlight, errs []error, again func([]*inFlight) []error) {
	first, longest := outagePauses(c.opts.OutageHold)
	since, pause := time.Now(), first
	for {
		var waiting []int
		for i, err := range errs {
			if err != errGivenBack && fabric.ClassOf(err) == unavailable {
				waiting = append(waiting, i)
			}
		}
		if len(waiting) == 0 {
			return
		}
		if pause == first {
			c.log.Warn("a dependency is down; keeping the message and trying again", "id", ms[waiting[0]].env.ID,
				"messages", len(waiting), "err", errs[waiting[0]])
		}
		if time.Since(since)+pause > c.opts.OutageHold || !sleep(stop, pause) {
			for _, i := range waiting {
				if err := ms[i].d.Nack(false, true); err != nil {
					c.log.Warn("giving a message back failed; the broker will redeliver it", "id", ms[i].env.ID, "err", err)
				}
				ms[i].span.End()
				errs[i] = errGivenBack
			}
			return
		}
		for _, i := range waiting {
			c.metrics.OutageWaits.Add(ms[i].ctx, 1, telemetry.Attrs(c.spec.Queue, ms[i].typ))
		}
		sub := make([]*inFlight, len(waiting))
		for k, i := range waiting {
			sub[k] = ms[i]
		}
		for k, err := range again(sub) {
			errs[waiting[k]] = err
		}
		pause = min(2*pause, longest)
	}
}

// sleep waits d, or less when ctx ends first; it reports whether it
// waited the whole d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pace waits for the consumer's pacer. A wait cut short (the consumer is
// stopping) puts the message back in the queue untouched and reports
// false.
func (c *Consumer) pace(m *inFlight) bool {
	if c.opts.Pace == nil {
		return true
	}
	start := time.Now()
	if err := c.opts.Pace.Wait(m.ctx); err != nil {
		if nerr := m.d.Nack(false, true); nerr != nil {
			c.log.Warn("nack of a message whose pacing was cut short failed; it will be redelivered", "id", m.env.ID, "err", nerr)
		}
		m.span.End()
		return false
	}
	c.metrics.PaceWait.Record(m.ctx, time.Since(start).Seconds(), telemetry.Attrs(c.spec.Queue, m.typ))
	return true
}

func (c *Consumer) processBatch(ctx, stop context.Context, ds []amqp.Delivery) {
	var batch []*inFlight
	for _, d := range ds {
		if m := c.begin(ctx, d); m != nil && c.pace(m) {
			batch = append(batch, m)
		}
	}
	if len(batch) == 0 {
		return
	}
	c.metrics.BatchSize.Record(ctx, int64(len(batch)), metric.WithAttributes(attribute.String("consumer", c.spec.Queue)))
	errs := c.callBatch(ctx, batch)
	c.waitOut(stop, batch, errs, func(sub []*inFlight) []error { return c.callBatch(ctx, sub) })
	for i, m := range batch {
		if errs[i] != errGivenBack {
			c.settle(m, errs[i])
		}
	}
}

// settle carries out the handler's answer for one message: ack, a retry
// tier, or the DLQ.
func (c *Consumer) settle(m *inFlight, err error) {
	defer m.span.End()
	ctx, d, env := m.ctx, m.d, m.env
	attrs := telemetry.Attrs(c.spec.Queue, m.typ)
	c.metrics.Duration.Record(ctx, time.Since(m.start).Seconds(), attrs)
	if err == nil {
		if aerr := d.Ack(false); aerr != nil {
			c.log.Warn("ack failed; the message will be redelivered", "id", env.ID, "err", aerr)
		}
		c.metrics.Processed.Add(ctx, 1, attrs)
		return
	}
	m.span.RecordError(err)
	m.span.SetStatus(codes.Error, err.Error())
	class := fabric.ClassOf(err)
	c.metrics.Failed.Add(ctx, 1, telemetry.Attrs(c.spec.Queue, m.typ, attribute.String("class", string(class))))
	attempts := wire.Attempts(d.Headers)
	switch class {
	case fabric.ClassInvalid:
		c.deadLetter(ctx, d, env.ID, class, fabric.ReasonOf(err, wire.ReasonHandlerInvalid), err)
	case fabric.ClassPermanent:
		c.deadLetter(ctx, d, env.ID, class, fabric.ReasonOf(err, wire.ReasonPermanent), err)
	default:
		limit := len(c.tiers)
		if class == fabric.ClassUnknown {
			limit = min(limit, c.opts.UnknownRetries)
		}
		if attempts < limit {
			c.retry(ctx, d, env.ID, attempts+1, class, err)
			return
		}
		c.deadLetter(ctx, d, env.ID, class, wire.ReasonRetriesExhausted, err)
	}
}

// callBatch runs the batch handler. A panic, or an answer of the wrong
// length, becomes an unknown-class error for every message: none of them
// is acked on a handler's word that cannot be trusted.
func (c *Consumer) callBatch(ctx context.Context, batch []*inFlight) (errs []error) {
	in := make([]fabric.Received, len(batch))
	for i, m := range batch {
		in[i] = fabric.Received{Ctx: m.ctx, Env: m.env}
	}
	all := func(err error) []error {
		out := make([]error, len(batch))
		for i := range out {
			out[i] = err
		}
		return out
	}
	defer func() {
		if r := recover(); r != nil {
			ids := make([]string, len(batch))
			for i, m := range batch {
				ids[i] = m.env.ID
			}
			c.log.Error("batch handler panicked", "ids", ids, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			errs = all(fmt.Errorf("batch handler panic: %v", r))
		}
	}()
	errs = c.bh(ctx, in)
	if len(errs) != len(batch) {
		return all(fmt.Errorf("batch handler answered %d results for %d messages", len(errs), len(batch)))
	}
	return errs
}

// call runs the handler, turning a panic into an unknown-class error so one
// bad message cannot take the consumer down. The stack is logged: the
// error alone, all that retries and the DLQ keep, does not say where.
func (c *Consumer) call(ctx context.Context, env envelope.Envelope) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "id", env.ID, "type", env.Type, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return c.h(ctx, env)
}

// brokerHeaders are owned by RabbitMQ; copying them onto a republished
// message is refused by 4.x and misleading on 3.x.
func forwardHeaders(h amqp.Table) amqp.Table {
	out := amqp.Table{}
	for k, v := range h {
		switch {
		case k == "x-death", k == "x-delivery-count", strings.HasPrefix(k, "x-first-death"), strings.HasPrefix(k, "x-last-death"):
			continue
		}
		out[k] = v
	}
	return out
}

// forward republishes d to exchange with key and headers; a positive ttl
// becomes the message's expiration (a retry's delay).
func (c *Consumer) forward(ctx context.Context, d amqp.Delivery, exchange, key string, headers amqp.Table, ttl time.Duration) error {
	m := Message{
		Exchange: exchange, RoutingKey: key, Body: d.Body, MessageID: d.MessageId,
		CorrelationID: d.CorrelationId, Type: d.Type, Headers: headers, Timestamp: d.Timestamp,
	}
	if ttl > 0 {
		m.Expiration = strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)
	}
	pd, err := c.pub.Send(ctx, m)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pd.Wait(wctx)
}

func (c *Consumer) retry(ctx context.Context, d amqp.Delivery, id string, attempt int, class fabric.Class, cause error) {
	h := forwardHeaders(d.Headers)
	h[wire.HeaderAttempts] = int32(attempt)
	h[wire.HeaderError] = text.Truncate(cause.Error(), 1000)
	h[wire.HeaderErrorClass] = string(class)
	h[wire.HeaderLastAttempt] = time.Now().UTC().Format(time.RFC3339Nano)
	if _, ok := h[wire.HeaderOrigExchange]; !ok {
		h[wire.HeaderOrigExchange] = d.Exchange
		h[wire.HeaderOrigRouting] = d.RoutingKey
	}
	// platform.retry (or the topology's retry exchange) routes key
	// Q.retry.<n> to that queue alone; the service's user may publish only
	// its own queues' keys there. The message carries the tier's delay as
	// its expiration, so the tier returns it to Q after that delay whether
	// or not the tier's policy (message-ttl, set by `fabricctl topology
	// apply`) is there yet; with both, the lower wins. The broker drops the
	// expiration when it dead-letters the message back to Q.
	if err := c.forward(ctx, d, c.spec.RetryExchange(), c.spec.RetryQueue(attempt), h, c.tiers[attempt-1]); err != nil {
		c.requeue(d, id, "retry publish failed", err)
		return
	}
	c.metrics.Retried.Add(ctx, 1, telemetry.Attrs(c.spec.Queue, d.Type))
	c.log.Info("message scheduled for retry", "id", id, "attempt", attempt, "class", class, "err", cause)
	if err := d.Ack(false); err != nil {
		c.log.Warn("ack after retry failed; the message will be redelivered", "id", id, "err", err)
	}
}

func (c *Consumer) deadLetter(ctx context.Context, d amqp.Delivery, id string, class fabric.Class, reason string, cause error) {
	if id == "" {
		id = d.MessageId
	}
	h := forwardHeaders(d.Headers)
	h[wire.HeaderEventID] = id
	h[wire.HeaderConsumer] = c.spec.Queue
	h[wire.HeaderAttempts] = int32(wire.Attempts(d.Headers) + 1)
	h[wire.HeaderError] = text.Truncate(cause.Error(), 1000)
	h[wire.HeaderErrorClass] = string(class)
	h[wire.HeaderReason] = reason
	h[wire.HeaderLastAttempt] = time.Now().UTC().Format(time.RFC3339Nano)
	if _, ok := h[wire.HeaderOrigExchange]; !ok {
		h[wire.HeaderOrigExchange] = d.Exchange
		h[wire.HeaderOrigRouting] = d.RoutingKey
	}
	if err := c.forward(ctx, d, c.spec.DeadLetterExchange(), c.spec.Queue, h, 0); err != nil {
		c.requeue(d, id, "dead-letter publish failed", err)
		return
	}
	c.metrics.DeadLettered.Add(ctx, 1, telemetry.Attrs(c.spec.Queue, d.Type, attribute.String("reason", reason)))
	c.log.Warn("message dead-lettered", "id", id, "reason", reason, "class", class, "err", cause)
	if err := d.Ack(false); err != nil {
		c.log.Warn("ack after dead-letter failed; the message will be redelivered", "id", id, "err", err)
	}
}

// requeue hands a message back when it could not be moved. The queue's
// delivery limit stops this from looping forever.
func (c *Consumer) requeue(d amqp.Delivery, id, why string, err error) {
	c.log.Error(why+"; returning message to the queue", "id", id, "err", err)
	if nerr := d.Nack(false, true); nerr != nil {
		c.log.Warn("nack failed; the broker requeues on channel close", "id", id, "err", nerr)
	}
}

// missingField reports whether err says field is missing from an envelope.
func missingField(err error, field string) bool {
	var fe *envelope.FieldError
	return errors.As(err, &fe) && fe.Field == field && errors.Is(fe.Err, envelope.ErrMissingField)
}
