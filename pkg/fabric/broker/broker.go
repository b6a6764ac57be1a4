// Package broker is the fabric's engine on RabbitMQ. Conn supervises one
// AMQP connection: it dials with backoff, redials when the connection drops
// (to the next node of a cluster when it was given several addresses), runs
// reconnect hooks (topology redeclaration) before anyone gets a channel, and
// hands out channels only while connected. Publisher publishes envelopes
// with confirms (a publish is sent only when confirmed and routed);
// Consumer runs a fabric.Handler or fabric.BatchHandler on a queue with
// manual acks, retry tiers and dead letters. Both watch their own channels
// and ask again after a drop. Services do not use it directly: the service
// host runs them, and application code publishes through the outbox.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	neturl "net/url"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrClosed is returned once Close has been called.
var ErrClosed = errors.New("broker: connection closed by the application")

// Options tune a Conn. The zero value is usable.
type Options struct {
	// Name is shown in the broker's connection list.
	Name string
	// TLS is used for amqps:// URLs (CA, client certificate).
	TLS *tls.Config
	// Heartbeat defaults to 10 s.
	Heartbeat time.Duration
	// MinBackoff and MaxBackoff bound the redial delay (100 ms, 2 s). The
	// cap is what a restarted broker waits for its clients at worst: at
	// 10 s, effects landed ~15 s after a restart; a redial every 2 s
	// costs a down broker nothing worth saving.
	MinBackoff, MaxBackoff time.Duration
	// Logger defaults to slog.Default's handler discarding nothing.
	Logger *slog.Logger
}

// Hook runs after every successful (re)connect, before channels are handed
// out. A failing hook drops the connection and the supervisor tries again.
type Hook func(ctx context.Context, conn *amqp.Connection) error

// Conn is a supervised connection. It is safe for concurrent use.
type Conn struct {
	urls []string
	next int // index into urls of the next dial; guarded by mu
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	cur      *amqp.Connection
	ready    chan struct{} // closed while cur is usable
	hooks    []Hook
	closed   bool
	cancel   context.CancelFunc
	done     chan struct{}
	connects int
}

// Dial connects to url and starts supervising. It retries with backoff until
// the first connection succeeds or ctx ends; the returned Conn then lives
// until Close, independent of ctx.
//
// url may list the nodes of a cluster separated by commas
// ("amqp://u:p@rmq1/v,amqp://u:p@rmq2/v"). Each dial takes the next
// address in turn, so after a node fails the redial goes to another one;
// the first dial starts at a random node to spread a fleet's connections.
func Dial(ctx context.Context, url string, opts Options, hooks ...Hook) (*Conn, error) {
	urls := splitURLs(url)
	if len(urls) == 0 {
		return nil, errors.New("broker: dial: no address given")
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 10 * time.Second
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 2 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Conn{urls: urls, next: rand.IntN(len(urls)), opts: opts, log: log,
		ready: make(chan struct{}), hooks: hooks, done: make(chan struct{})}
	conn, err := c.connectLoop(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: dial: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.setConnected(conn)
	go c.supervise(sctx, conn)
	return c, nil
}

// splitURLs returns the addresses of a comma-separated list, blanks
// dropped.
func splitURLs(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// nextURL returns the address of the next dial and advances the rotation.
func (c *Conn) nextURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.urls[c.next%len(c.urls)]
	c.next = (c.next + 1) % len(c.urls)
	return u
}

func (c *Conn) dialOnce(ctx context.Context) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	if c.opts.Name != "" {
		props.SetClientConnectionName(c.opts.Name)
	}
	url := c.nextURL()
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:       c.opts.Heartbeat,
		TLSClientConfig: c.opts.TLS,
		Properties:      props,
		Dial:            amqp.DefaultDial(5 * time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redact(url), err)
	}
	c.mu.Lock()
	hooks := append([]Hook(nil), c.hooks...)
	c.mu.Unlock()
	for _, h := range hooks {
		if err := h(ctx, conn); err != nil {
			conn.Close()
			return nil, fmt.Errorf("reconnect hook: %w", err)
		}
	}
	return conn, nil
}

// connectLoop dials until success or ctx ends. Authentication and vhost
// errors are not retried: they will not fix themselves.
func (c *Conn) connectLoop(ctx context.Context) (*amqp.Connection, error) {
	backoff := c.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		conn, err := c.dialOnce(ctx)
		if err == nil {
			return conn, nil
		}
		// Refused credentials or vhost at the very first dial are a
		// configuration error: fail at once rather than retry forever.
		// With several nodes, only once every node has said so.
		var aerr *amqp.Error
		if errors.As(err, &aerr) && (aerr.Code == amqp.AccessRefused || aerr.Code == amqp.NotAllowed) && attempt == 1 && c.connects == 0 && len(c.urls) == 1 {
			return nil, err
		}
		var ferr *FatalError
		if errors.As(err, &ferr) {
			return nil, err
		}
		if len(c.urls) > 1 && attempt%len(c.urls) != 0 {
			// Other nodes are untried this round: go to the next at once.
			c.log.Warn("broker node unreachable, trying the next", "attempt", attempt, "err", err)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			continue
		}
		c.log.Warn("broker unreachable, retrying", "attempt", attempt, "in", backoff, "err", err)
		// Full jitter keeps a fleet of services from redialling in step.
		wait := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// FatalError marks hook errors that retrying cannot fix (a topology
// conflict); the supervisor gives up on them at first dial.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

func (c *Conn) setConnected(conn *amqp.Connection) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur = conn
	c.connects++
	close(c.ready)
}

func (c *Conn) supervise(ctx context.Context, conn *amqp.Connection) {
	defer close(c.done)
	for {
		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case <-ctx.Done():
			return
		case err := <-closed:
			c.mu.Lock()
			c.cur = nil
			c.ready = make(chan struct{})
			c.mu.Unlock()
			c.log.Warn("broker connection lost, reconnecting", "err", err)
		}
		var err error
		conn, err = c.connectLoop(ctx)
		if err != nil {
			c.log.Error("broker reconnect abandoned", "err", err)
			return
		}
		c.log.Info("broker reconnected")
		c.setConnected(conn)
	}
}

// Connection waits until connected (or ctx ends) and returns the current
// connection.
func (c *Conn) Connection(ctx context.Context) (*amqp.Connection, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		cur, ready := c.cur, c.ready
		c.mu.Unlock()
		if cur != nil && !cur.IsClosed() {
			return cur, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("broker: waiting for connection: %w", ctx.Err())
		case <-ready:
		case <-c.done:
			return nil, ErrClosed
		case <-time.After(50 * time.Millisecond):
			// cur may have died before the supervisor noticed.
		}
	}
}

// Channel waits for a connection and opens a channel on it.
func (c *Conn) Channel(ctx context.Context) (*amqp.Channel, error) {
	for {
		conn, err := c.Connection(ctx)
		if err != nil {
			return nil, err
		}
		ch, err := conn.Channel()
		if err == nil {
			return ch, nil
		}
		if errors.Is(err, amqp.ErrClosed) {
			continue // the supervisor will redial
		}
		return nil, fmt.Errorf("broker: open channel: %w", err)
	}
}

// Connects reports how many times a connection was established.
func (c *Conn) Connects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connects
}

// Close stops supervision and closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cur := c.cur
	c.mu.Unlock()
	c.cancel()
	<-c.done
	if cur != nil && !cur.IsClosed() {
		return cur.Close()
	}
	return nil
}

// redact drops the password from an address for logs and errors.
func redact(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "(unparseable broker address)"
	}
	return u.Redacted()
}
