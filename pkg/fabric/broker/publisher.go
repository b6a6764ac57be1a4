package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Message is a raw AMQP message the fabric publishes with confirms. Domain
// code publishes envelopes; Message serves retry routing, dead-lettering and
// replay, which must forward bodies untouched.
type Message struct {
	Exchange      string
	RoutingKey    string
	Body          []byte
	MessageID     string
	CorrelationID string
	Type          string
	Headers       amqp.Table
	Timestamp     time.Time
	// Expiration is the message's time to live in its queue, in
	// milliseconds ("" for none): a retry's delay in its retry tier.
	Expiration string
}

// PublisherOptions tune a Publisher. The zero value is usable.
type PublisherOptions struct {
	// Window bounds unconfirmed messages in flight (default 256).
	Window int
	// ConfirmTimeout bounds Publish's wait for a confirm (default 30 s).
	ConfirmTimeout time.Duration
	// Codec writes envelopes in a wire format other than the platform's
	// (package codec); nil publishes the platform's envelope.
	Codec fabric.Codec
	// Exchange, when set, is where every envelope is published (a
	// topology's events exchange, e.g. car.events); empty routes by kind
	// to the platform's exchanges (Route).
	Exchange string
	Tracer   trace.TracerProvider
	Metrics  *telemetry.Metrics
	Logger   *slog.Logger
}

// Publisher publishes with publisher confirms, mandatory routing and a
// bounded pipeline of unconfirmed messages. It is safe for concurrent use.
// A nil error from Publish or Pending.Wait means the broker confirmed the
// message and routed it to at least one queue; any error means it did not.
type Publisher struct {
	conn    *Conn
	reg     *registry.Registry
	opts    PublisherOptions
	tracer  trace.Tracer
	metrics *telemetry.Metrics
	window  chan struct{}

	// chMu guards cur and opening only; nobody holds it across I/O, so
	// a caller waiting for a channel waits on its own ctx.
	chMu    sync.Mutex
	cur     *pubChannel
	opening chan struct{} // closed when the caller opening a channel is done
	done    chan struct{}
	once    sync.Once
}

// pubChannel is one confirm-mode channel and the publishes awaiting its
// confirms; it dies with the channel.
type pubChannel struct {
	ch *amqp.Channel
	// turn serialises taking a delivery tag and writing the frame: the
	// broker numbers confirms in the order frames arrive. A channel of
	// one slot rather than a mutex, so a caller waits for its turn only
	// as long as its ctx allows.
	turn chan struct{}

	mu      sync.Mutex
	pending map[uint64]*Pending
	byID    map[string][]uint64
	dead    error
	// retired: the broker nacked a publish here. The channel takes no
	// new publish and closes once its pending ones are settled; the
	// next publish opens a fresh channel (see retire).
	retired bool
	retire  func(*pubChannel)
}

// Pending is a publish awaiting its confirm.
type Pending struct {
	msgID    string
	done     chan struct{}
	err      error
	returned *amqp.Return
	release  func()
	onDone   func(error)
}

// Wait blocks until the broker confirms (nil), refuses, returns or loses the
// message (an error), or ctx ends (ctx's error: the outcome is unknown and
// the message must be treated as not sent).
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("publish %s: waiting for confirm: %w", p.msgID, ctx.Err())
	}
}

// Done is closed when the outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Err returns the outcome once Done is closed.
func (p *Pending) Err() error { return p.err }

func (p *Pending) resolve(err error) {
	p.err = err
	close(p.done)
	p.release()
	if p.onDone != nil {
		p.onDone(err)
	}
}

// NewPublisher returns a publisher on conn. reg validates envelopes before
// they leave (unknown types and schema failures are refused).
func NewPublisher(conn *Conn, reg *registry.Registry, opts PublisherOptions) (*Publisher, error) {
	if opts.Window <= 0 {
		opts.Window = 256
	}
	if opts.ConfirmTimeout <= 0 {
		opts.ConfirmTimeout = 30 * time.Second
	}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	m := opts.Metrics
	if m == nil {
		var err error
		if m, err = telemetry.NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	return &Publisher{
		conn:    conn,
		reg:     reg,
		opts:    opts,
		tracer:  tp.Tracer("github.com/agora-platform/agora/pkg/fabric"),
		metrics: m,
		window:  make(chan struct{}, opts.Window),
		done:    make(chan struct{}),
	}, nil
}

// EnvelopeMessage validates e against the registry and builds its AMQP
// message: body, routing, the message id, correlation id, type and
// timestamp properties, and the x-tenant-id header, the one header the
// platform's consumers read (they check it against the envelope). Every
// other header would be stored and copied by the broker on every message
// for no reader: the envelope in the body says the rest.
func EnvelopeMessage(reg *registry.Registry, e envelope.Envelope) (Message, error) {
	def, err := reg.Check(e)
	if err != nil {
		return Message{}, fmt.Errorf("publish %s %s: %w", e.Type, e.ID, err)
	}
	body, err := e.EncodeValidated() // Check parsed the payload
	if err != nil {
		return Message{}, err
	}
	ex, key := topology.Route(def)
	h := amqp.Table{}
	if e.TenantID != "" {
		h[wire.HeaderTenant] = e.TenantID
	}
	return Message{
		Exchange: ex, RoutingKey: key, Body: body, MessageID: e.ID,
		CorrelationID: e.CorrelationID, Type: e.Type, Headers: h, Timestamp: e.OccurredAt,
	}, nil
}

// Publish validates e, publishes it and waits for the confirm.
func (p *Publisher) Publish(ctx context.Context, e envelope.Envelope) error {
	pd, err := p.PublishAsync(ctx, e)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, p.opts.ConfirmTimeout)
	defer cancel()
	if err := pd.Wait(wctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("publish %s: %w", e.ID, ErrConfirmTimeout)
		}
		return err
	}
	return nil
}

// PublishAsync validates e and sends it, returning before the confirm so
// callers can pipeline; Wait on the result. It blocks while the in-flight
// window is full.
func (p *Publisher) PublishAsync(ctx context.Context, e envelope.Envelope) (*Pending, error) {
	m, err := EncodeEnvelope(p.reg, p.opts.Codec, p.opts.Exchange, e)
	if err != nil {
		return nil, err
	}
	ctx, span := p.tracer.Start(ctx, "publish "+e.Type, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "rabbitmq"),
			attribute.String("messaging.destination.name", m.Exchange),
			attribute.String("messaging.rabbitmq.destination.routing_key", m.RoutingKey),
			attribute.String("messaging.message.id", e.ID),
			attribute.String("messaging.message.conversation_id", e.CorrelationID),
		))
	pd, err := p.send(ctx, m, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	return pd, nil
}

// Send publishes a raw message (mandatory, persistent) and returns its
// pending confirm. The trace context of ctx is injected into its headers.
func (p *Publisher) Send(ctx context.Context, m Message) (*Pending, error) {
	return p.send(ctx, m, nil)
}

// send publishes m; onDone, if set, runs once with the outcome (on the
// confirm listener: it must not block).
func (p *Publisher) send(ctx context.Context, m Message, onDone func(error)) (*Pending, error) {
	select {
	case p.window <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("publish %s: waiting for window: %w", m.MessageID, ctx.Err())
	case <-p.done:
		return nil, errPublisherClosed
	}
	var once sync.Once
	release := func() { once.Do(func() { <-p.window }) }

	headers := amqp.Table{}
	for k, v := range m.Headers {
		headers[k] = v
	}
	telemetry.Propagator().Inject(ctx, telemetry.HeaderCarrier(headers))
	ts := m.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	pub := amqp.Publishing{
		ContentType:   "application/json",
		DeliveryMode:  amqp.Persistent,
		MessageId:     m.MessageID,
		CorrelationId: m.CorrelationID,
		Type:          m.Type,
		Timestamp:     ts.UTC(),
		Headers:       headers,
		Expiration:    m.Expiration,
		Body:          m.Body,
	}
	for {
		pc, err := p.channel(ctx)
		if err != nil {
			release()
			return nil, err
		}
		pd := &Pending{msgID: m.MessageID, done: make(chan struct{}), release: release, onDone: onDone}
		select {
		case pc.turn <- struct{}{}:
		case <-ctx.Done():
			release()
			return nil, fmt.Errorf("publish %s: waiting for the channel: %w", m.MessageID, ctx.Err())
		}
		seq := pc.ch.GetNextPublishSeqNo()
		if !pc.track(seq, pd) {
			<-pc.turn
			continue // channel died between channel() and track(): take a new one
		}
		err = pc.ch.PublishWithContext(ctx, m.Exchange, m.RoutingKey, true, false, pub)
		<-pc.turn
		if err != nil {
			pc.untrack(seq)
			release()
			if errors.Is(err, amqp.ErrClosed) && ctx.Err() == nil {
				continue
			}
			return nil, fmt.Errorf("publish %s to %s/%s: %w", m.MessageID, m.Exchange, m.RoutingKey, err)
		}
		return pd, nil
	}
}

// channel returns the live confirm channel, opening one when needed. One
// caller opens it (waiting for the broker with its own ctx) while the
// others wait for that, each with its own ctx; if the opener gives up,
// the next waiter opens.
func (p *Publisher) channel(ctx context.Context) (*pubChannel, error) {
	for {
		p.chMu.Lock()
		select {
		case <-p.done:
			p.chMu.Unlock()
			return nil, errPublisherClosed
		default:
		}
		if p.cur != nil && !p.cur.isDead() {
			pc := p.cur
			p.chMu.Unlock()
			return pc, nil
		}
		if p.opening == nil {
			opened := make(chan struct{})
			p.opening = opened
			p.chMu.Unlock()
			pc, err := p.open(ctx)
			p.chMu.Lock()
			p.opening = nil
			if err == nil {
				p.cur = pc
			}
			p.chMu.Unlock()
			close(opened)
			if err != nil {
				return nil, err
			}
			return p.useUnlessClosed(pc)
		}
		opening := p.opening
		p.chMu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			return nil, fmt.Errorf("publisher: waiting for a channel: %w", ctx.Err())
		case <-p.done:
			return nil, errPublisherClosed
		}
	}
}

// useUnlessClosed returns pc, or closes it when Close ran while it was
// being opened (Close saw no channel to close).
func (p *Publisher) useUnlessClosed(pc *pubChannel) (*pubChannel, error) {
	select {
	case <-p.done:
		p.chMu.Lock()
		if p.cur == pc {
			p.cur = nil
		}
		p.chMu.Unlock()
		pc.ch.Close()
		pc.fail(errPublisherClosed, p.metrics)
		return nil, errPublisherClosed
	default:
		return pc, nil
	}
}

// open opens a confirm-mode channel and starts its confirm listener.
func (p *Publisher) open(ctx context.Context) (*pubChannel, error) {
	var ch *amqp.Channel
	for {
		var err error
		if ch, err = p.conn.Channel(ctx); err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
		err = ch.Confirm(false)
		if err == nil {
			break
		}
		ch.Close()
		if droppedUnderUs(err) && ctx.Err() == nil {
			continue // the connection died between the channel and confirm mode: the supervisor redials
		}
		return nil, fmt.Errorf("publisher: confirm mode: %w", err)
	}
	pc := &pubChannel{ch: ch, turn: make(chan struct{}, 1), pending: map[uint64]*Pending{}, byID: map[string][]uint64{},
		retire: p.retire}
	// Confirms buffer holds a full window so the client's reader never waits
	// on us (it drops a notification after 5 s). Returns are unbuffered on
	// purpose: the reader hands us a basic.return before it processes the
	// basic.ack that follows it, so by the time we see the ack we have
	// recorded the return. One goroutine handles both, in that order.
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, p.opts.Window+16))
	returns := ch.NotifyReturn(make(chan amqp.Return))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	go pc.listen(confirms, returns, closed, p.metrics)
	return pc, nil
}

// droppedUnderUs reports whether err is the connection going away (closed,
// or closed by the broker or an operator), not a refusal of the request.
func droppedUnderUs(err error) bool {
	var ae *amqp.Error
	return errors.Is(err, amqp.ErrClosed) || (errors.As(err, &ae) && ae.Code == amqp.ConnectionForced)
}

// retire stops handing out pc after the broker nacked a publish on it. A
// nack says the queue did not take the message, not why; the channel's
// view of a quorum queue may be what is wrong. On RabbitMQ 3.10 a channel
// opened while the queue's leader was a node just cut off the network
// nacked every publish to the queue for minutes after a new leader was
// elected, while a new channel on the same node was acked at once (the
// cluster test, e2e/cluster_test.go). A new channel costs a round trip; a
// channel that keeps nacking costs the publisher.
func (p *Publisher) retire(pc *pubChannel) {
	p.chMu.Lock()
	if p.cur == pc {
		p.cur = nil
	}
	p.chMu.Unlock()
	pc.mu.Lock()
	pc.retired = true
	idle := len(pc.pending) == 0
	pc.mu.Unlock()
	if idle {
		go pc.ch.Close() // not on the listener: Close waits for the reader
	}
}

func (pc *pubChannel) isDead() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.dead != nil
}

func (pc *pubChannel) track(seq uint64, pd *Pending) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.dead != nil || pc.retired {
		return false
	}
	pc.pending[seq] = pd
	pc.byID[pd.msgID] = append(pc.byID[pd.msgID], seq)
	return true
}

func (pc *pubChannel) untrack(seq uint64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pd, ok := pc.pending[seq]; ok {
		delete(pc.pending, seq)
		pc.dropID(pd.msgID, seq)
	}
}

func (pc *pubChannel) dropID(id string, seq uint64) {
	seqs := pc.byID[id]
	for i, s := range seqs {
		if s == seq {
			seqs = append(seqs[:i], seqs[i+1:]...)
			break
		}
	}
	if len(seqs) == 0 {
		delete(pc.byID, id)
	} else {
		pc.byID[id] = seqs
	}
}

func (pc *pubChannel) listen(confirms <-chan amqp.Confirmation, returns <-chan amqp.Return, closed <-chan *amqp.Error, m *telemetry.Metrics) {
	// lost is the error of publishes the channel closed under. The library
	// hands the broker's reason to closed (buffered) before it closes
	// confirms and returns, so when either is seen closed the reason, if
	// any, is already there: a 403 (ACCESS_REFUSED) must not read as a
	// network fault because the select took the other case first.
	lost := func(err *amqp.Error) error {
		if err == nil {
			select {
			case err = <-closed:
			default:
			}
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConnectionLost, err)
		}
		return ErrConnectionLost
	}
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				pc.drain(confirms, m)
				pc.fail(lost(nil), m)
				return
			}
			pc.mu.Lock()
			// The oldest unconfirmed publish with this id is the one returned:
			// the broker returns and confirms in publish order.
			for _, seq := range pc.byID[r.MessageId] {
				if pd := pc.pending[seq]; pd != nil && pd.returned == nil {
					ret := r
					pd.returned = &ret
					break
				}
			}
			pc.mu.Unlock()
		case c, ok := <-confirms:
			if !ok {
				pc.fail(lost(nil), m)
				return
			}
			pc.confirm(c, m)
		case err := <-closed:
			pc.drain(confirms, m)
			pc.fail(lost(err), m)
			return
		}
	}
}

// drain settles confirms that arrived before the channel closed, so a
// message the broker did confirm is not reported lost.
func (pc *pubChannel) drain(confirms <-chan amqp.Confirmation, m *telemetry.Metrics) {
	for {
		select {
		case c, ok := <-confirms:
			if !ok {
				return
			}
			pc.confirm(c, m)
		default:
			return
		}
	}
}

func (pc *pubChannel) confirm(c amqp.Confirmation, m *telemetry.Metrics) {
	pc.mu.Lock()
	pd := pc.pending[c.DeliveryTag]
	if pd != nil {
		delete(pc.pending, c.DeliveryTag)
		pc.dropID(pd.msgID, c.DeliveryTag)
	}
	drained := pc.retired && pd != nil && len(pc.pending) == 0
	pc.mu.Unlock()
	if drained {
		go pc.ch.Close() // retired and settled; not on the listener
	}
	if pd == nil {
		return
	}
	switch {
	case !c.Ack:
		m.PublishFail.Add(context.Background(), 1)
		if pc.retire != nil {
			pc.retire(pc)
		}
		pd.resolve(fmt.Errorf("publish %s: %w", pd.msgID, errNacked))
	case pd.returned != nil:
		m.PublishFail.Add(context.Background(), 1)
		pd.resolve(fmt.Errorf("publish %s to %s/%s: %w: %d %s", pd.msgID, pd.returned.Exchange,
			pd.returned.RoutingKey, ErrUnroutable, pd.returned.ReplyCode, pd.returned.ReplyText))
	default:
		m.Published.Add(context.Background(), 1)
		pd.resolve(nil)
	}
}

// fail resolves every pending publish with err: without a confirm, none of
// them may be reported as sent.
func (pc *pubChannel) fail(err error, m *telemetry.Metrics) {
	pc.mu.Lock()
	if pc.dead == nil {
		pc.dead = err
	}
	pending := pc.pending
	pc.pending = map[uint64]*Pending{}
	pc.byID = map[string][]uint64{}
	pc.mu.Unlock()
	for _, pd := range pending {
		m.PublishFail.Add(context.Background(), 1)
		pd.resolve(fmt.Errorf("publish %s: %w", pd.msgID, err))
	}
}

// Close fails publishes still waiting and closes the channel.
func (p *Publisher) Close() error {
	p.once.Do(func() { close(p.done) })
	p.chMu.Lock()
	pc := p.cur
	p.cur = nil
	p.chMu.Unlock()
	if pc == nil {
		return nil
	}
	err := pc.ch.Close()
	pc.fail(errPublisherClosed, p.metrics)
	if err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("publisher close: %w", err)
	}
	return nil
}

// EncodeEnvelope validates e against the registry and builds its AMQP
// message with codec c on exchange. A nil c is EnvelopeMessage (with
// exchange, when set, in place of the one of the type's kind); with a
// codec, the routing key, body, properties and headers are the codec's and
// the exchange is exchange, or the kind's when empty.
func EncodeEnvelope(reg *registry.Registry, c fabric.Codec, exchange string, e envelope.Envelope) (Message, error) {
	if c == nil {
		m, err := EnvelopeMessage(reg, e)
		if err == nil && exchange != "" {
			m.Exchange = exchange
		}
		return m, err
	}
	def, err := reg.Check(e)
	if err != nil {
		return Message{}, fmt.Errorf("publish %s %s: %w", e.Type, e.ID, err)
	}
	key, p, err := c.Encode(e)
	if err != nil {
		return Message{}, fmt.Errorf("publish %s %s: %w", e.Type, e.ID, err)
	}
	if exchange == "" {
		exchange, _ = topology.Route(def)
	}
	h := p.Headers
	if h == nil {
		h = amqp.Table{}
	}
	return Message{
		Exchange: exchange, RoutingKey: key, Body: p.Body, MessageID: p.MessageId,
		CorrelationID: p.CorrelationId, Type: p.Type, Headers: h, Timestamp: p.Timestamp,
	}, nil
}

// Publish errors. A publish that returns any error was not confirmed: the
// caller must treat the message as not sent (and may send it again).
var (
	// ErrUnroutable: the broker returned the message (mandatory): no queue
	// is bound for its routing key.
	ErrUnroutable = errors.New("fabric: message unroutable (returned by broker)")
	// errNacked: the broker refused the message.
	errNacked = errors.New("fabric: message nacked by broker")
	// ErrConnectionLost: the channel closed before the confirm arrived.
	// Transient: the connection comes back (what the broker said when it
	// closed the channel, wrapped beside it, may say otherwise).
	ErrConnectionLost error = transientError("fabric: channel closed before confirm")
	// ErrConfirmTimeout: no confirm within the publisher's timeout.
	// Transient.
	ErrConfirmTimeout error = transientError("fabric: confirm timed out")
	// errClosed: the publisher was closed.
	errPublisherClosed = errors.New("fabric: publisher closed")
)

// transientError is a publish error a retry may fix; retryable.Is
// (the HTTP edge's 503) and anyone else can ask it through Transient().
type transientError string

func (e transientError) Error() string   { return string(e) }
func (e transientError) Transient() bool { return true }
