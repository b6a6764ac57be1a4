// Package relay publishes what the outbox stored: it wakes on the outbox's
// NOTIFY at commit (or polls), claims rows in order per aggregate, sends
// them with publisher confirms and marks them published. The service host
// runs one per schema; a row whose publish is not confirmed stays and is
// sent again.
package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/internal/crosstenant"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/text"
)

// Sender publishes a message with confirms; *broker.Publisher satisfies it.
type Sender interface {
	Send(ctx context.Context, m broker.Message) (*broker.Pending, error)
}

// faults lets crash tests stop the relay at a named point; nil in
// production. Points: "relay.after-claim", "relay.after-confirm".
type faults interface {
	Hit(point string)
}

// Options tune a Relay. The zero value is usable.
type Options struct {
	// BatchSize is the most rows claimed per transaction (default 200).
	BatchSize int
	// Workers is how many relay cycles overlap (default 1). With two,
	// while one waits for its batch's confirms and records them, another
	// claims the rows committed meanwhile, so a row does not wait for a
	// whole cycle: a backlog drains about a tenth faster. But a platform
	// under steady load pays for it: the second worker's claims meet the
	// first's locked rows and skip them (SKIP LOCKED), often locking
	// nothing, and in the request-flow benchmark at 75 req/s two workers
	// per service cost 9 % more platform CPU per request and held p99 at
	// 4.1–4.2 s against 0.31–0.33 s with one (README, "Throughput").
	// Order per aggregate holds across workers as it does across relays.
	Workers int
	// PollInterval is the fallback wake-up when no notification arrives
	// (default 1 s); NOTIFY normally wakes the relay within milliseconds.
	PollInterval time.Duration
	// IdlePollInterval caps the fallback poll while nothing turns up: after
	// each poll that found no row the next waits twice as long, from
	// PollInterval up to this cap, and a row found, a notification or an
	// Expect brings it back to PollInterval (default 15 × PollInterval, at
	// most 15 s, never under PollInterval). The poll only finds rows nothing
	// announced (another process's outbox under WithWake, a lost listener),
	// so an idle platform need not ask every second: seven services' relays
	// made seven probes a second at rest.
	IdlePollInterval time.Duration
	// ExpectWindow bounds how long after Expect the workers look for the
	// announced rows, 2 ms after it at first and at most every 25 ms, while
	// their transaction has not committed (default 2 s); a rolled-back
	// transaction's rows never come.
	ExpectWindow time.Duration
	// ConfirmTimeout bounds one batch's wait for confirms (default 15 s).
	ConfirmTimeout time.Duration
	// MaxBackoff caps the delay between attempts of a failing row and the
	// relay's pause while the broker or database is down (default 5 s): the
	// pause is also how late the relay notices that they are back.
	MaxBackoff time.Duration
	// Retention deletes published rows older than this (default 7 days;
	// negative disables). RetentionEvery is how often (default 1 min).
	Retention      time.Duration
	RetentionEvery time.Duration
	// RetentionBatch bounds one DELETE (default 5,000 rows).
	RetentionBatch int
	Faults         faults
	Tracer         trace.TracerProvider
	Logger         *slog.Logger
}

// Relay publishes pending outbox rows of one schema. Several relays (in one
// process or many) may run on the same schema: rows are claimed with
// FOR UPDATE SKIP LOCKED and an aggregate's rows are never published out of
// order.
type Relay struct {
	pool   *pgxpool.Pool
	schema string
	pub    Sender
	opts   Options
	tracer trace.Tracer
	log    *slog.Logger
	// expectUntil is when Expect's window ends (unix nanoseconds), and
	// expected how many announced rows no cycle has claimed yet.
	expectUntil atomic.Int64
	expected    atomic.Int64
	// expectations wakes one worker (whichever takes it) per Expect.
	expectations chan struct{}
}

// New returns a relay for the outbox_event table in schema.
func New(pool *pgxpool.Pool, schema string, pub Sender, opts Options) *Relay {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 200
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.IdlePollInterval <= 0 {
		opts.IdlePollInterval = min(15*opts.PollInterval, 15*time.Second)
	}
	opts.IdlePollInterval = max(opts.IdlePollInterval, opts.PollInterval)
	if opts.ExpectWindow <= 0 {
		opts.ExpectWindow = 2 * time.Second
	}
	if opts.ConfirmTimeout <= 0 {
		opts.ConfirmTimeout = 15 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Retention == 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if opts.RetentionEvery <= 0 {
		opts.RetentionEvery = time.Minute
	}
	if opts.RetentionBatch <= 0 {
		opts.RetentionBatch = 5000
	}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{pool: pool, schema: schema, pub: pub, opts: opts, expectations: make(chan struct{}, 1),
		tracer: tp.Tracer("github.com/agora-platform/agora/pkg/fabric/outbox"),
		log:    log.With("component", "outbox-relay", "schema", schema)}
}

// Run relays until ctx ends and returns nil then. Its workers wake on
// NOTIFY, on the poll interval, immediately after a full batch, and when
// another worker has just published (rows it deferred behind that
// worker's batch are now free). While the broker or database is
// unavailable they back off; rows stay pending, so nothing is lost and
// nothing is skipped. Every goroutine Run starts has ended when it returns
// (the listener's connection is back in the pool, no longer listening).
func (r *Relay) Run(ctx context.Context) error {
	wakes := make([]chan struct{}, r.opts.Workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	// poke wakes every worker but skip (-1: all).
	poke := func(skip int) {
		for i, w := range wakes {
			if i == skip {
				continue
			}
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.listen(ctx, func() { poke(-1) }) })
	for i, w := range wakes {
		wg.Go(func() { r.work(ctx, i == 0, w, func() { poke(i) }) })
	}
	wg.Wait()
	return nil
}

// Expect tells the relay that a transaction in this process has just
// enqueued rows and will commit soon (Outbox.WithWake): a worker wakes
// and, from 2 ms on, polls at short intervals until cycles have claimed as
// many rows, or ExpectWindow has passed, instead of waiting for a
// notification. It never blocks.
func (r *Relay) Expect(rows int) {
	r.expected.Add(int64(rows))
	r.expectUntil.Store(time.Now().Add(r.opts.ExpectWindow).UnixNano())
	select {
	case r.expectations <- struct{}{}:
	default:
	}
}

// expecting reports whether announced rows are still to be claimed within
// Expect's window.
func (r *Relay) expecting() bool {
	if r.expected.Load() <= 0 {
		return false
	}
	if time.Now().UnixNano() >= r.expectUntil.Load() {
		r.expected.Store(0) // rolled back, or claimed by another process's relay
		return false
	}
	return true
}

// claimed counts n claimed rows against the announced ones. Rows another
// process enqueued count too, which may end the short polls early: the
// next Expect or the poll interval then finds what is left.
func (r *Relay) claimed(n int) {
	for {
		cur := r.expected.Load()
		next := max(cur-int64(n), 0)
		if cur <= 0 || r.expected.CompareAndSwap(cur, next) {
			return
		}
	}
}

// work is one relay loop; the first worker also applies retention.
// others wakes the other workers.
func (r *Relay) work(ctx context.Context, retention bool, wake <-chan struct{}, others func()) {
	lastRetention := time.Time{}
	backoff := 100 * time.Millisecond
	// The first look is 2 ms after Expect: the transaction that announced
	// the rows has yet to finish and commit.
	const firstPoll, lastPoll = 2 * time.Millisecond, 25 * time.Millisecond
	poll := firstPoll // the next short poll while expecting
	idle := false     // the last cycle claimed nothing: probe before claiming
	// idlePoll is the next fallback poll's wait: it doubles after each
	// cycle that claimed nothing, up to IdlePollInterval.
	idlePoll := r.opts.PollInterval
	// ahead is the batch in flight, if any (see cycle); its goroutine
	// records the outcome even after ctx ends.
	var ahead <-chan outcome
	defer func() {
		if ahead != nil {
			<-ahead
		}
	}()
	for {
		if ctx.Err() != nil {
			return
		}
		if retention && r.opts.Retention > 0 && time.Since(lastRetention) >= r.opts.RetentionEvery {
			if n, err := r.DeletePublished(ctx, r.opts.Retention); err != nil {
				r.log.Warn("outbox retention failed", "err", err)
			} else {
				lastRetention = time.Now()
				if n > 0 {
					r.log.Info("outbox retention", "deleted", n)
				}
			}
		}
		var res result
		var err error
		res, ahead, err = r.cycle(ctx, idle, ahead)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("outbox relay batch failed; backing off", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, r.opts.MaxBackoff)
			continue
		}
		idle = res.Claimed == 0
		r.claimed(res.Claimed)
		if res.Published > 0 {
			others()
		}
		if res.Failed > 0 {
			// Rows are rescheduled; keep the loop from spinning on them.
			if !sleep(ctx, min(backoff, r.opts.PollInterval)) {
				return
			}
			backoff = min(backoff*2, r.opts.MaxBackoff)
		} else {
			backoff = 100 * time.Millisecond
		}
		if res.Claimed == r.opts.BatchSize {
			continue
		}
		wait := r.opts.PollInterval
		if res.Claimed == 0 && res.Failed == 0 {
			wait, idlePoll = idlePoll, min(idlePoll*2, r.opts.IdlePollInterval)
		} else {
			idlePoll = r.opts.PollInterval
		}
		if r.expecting() {
			// Rows enqueued here may not have committed yet: look again
			// soon, then less and less often until something turns up.
			if res.Claimed > 0 {
				poll = firstPoll
			}
			wait, poll = poll, min(poll*2, lastPoll)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
			idlePoll = r.opts.PollInterval
		case <-r.expectations:
			poll, idlePoll = firstPoll, r.opts.PollInterval
			if !sleep(ctx, firstPoll) {
				t.Stop()
				return
			}
		case <-t.C:
		}
		t.Stop()
	}
}

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

// listen holds a LISTEN connection and wakes the workers on every
// notification, reconnecting after errors.
func (r *Relay) listen(ctx context.Context, wake func()) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := r.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{wire.OutboxChannel(r.schema)}.Sanitize()); err != nil {
				return err
			}
			defer func() {
				// A connection back in the pool must not keep listening.
				uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if _, err := conn.Exec(uctx, "UNLISTEN *"); err != nil {
					conn.Conn().Close(uctx)
				}
			}()
			for {
				if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
					return err
				}
				wake()
			}
		}()
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("outbox listener lost; falling back to polling until it reconnects", "err", err)
		sleep(ctx, time.Second)
	}
}

// probe asks whether a row is claimable, in one round trip: the
// transaction only carries the platform scope (row-level security), and a
// read-only one takes no transaction id.
func (r *Relay) probe(ctx context.Context, conn *pgx.Conn) (bool, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN READ ONLY")
	b.Queue(wire.PlatformScope)
	var found bool
	b.Queue(`SELECT EXISTS (SELECT 1 FROM ` + r.table() + ` WHERE ` + claimable + `)`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&found)
	})
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("outbox relay: probe: %w", err)
	}
	return found, nil
}

// result summarises one batch.
type result struct {
	Claimed   int // rows locked by this relay
	Deferred  int // rows left for later: an earlier row of their aggregate is pending elsewhere or failed
	Published int // rows confirmed and marked published
	Failed    int // rows whose publish failed and were rescheduled
}

type row struct {
	seq        int64
	id         string
	aggType    string
	aggID      string
	exchange   string
	routingKey string
	eventType  string
	headers    []byte
	body       []byte
	occurredAt time.Time
	attempts   int
	// aggPending lists the aggregate's pending rows up to its last row in
	// the batch, on the aggregate's first row of the batch only (nil on
	// the others): what the ordering check compares the batch with.
	aggPending []int64
	pending    *broker.Pending
	span       trace.Span
	err        error
}

// RelayOnce claims one batch, publishes it, waits for confirms and records
// the outcome in one transaction. Rows are marked published only after
// their confirm; unroutable, nacked or unconfirmed rows get an attempt, the
// error and a later next_attempt_at.
func (r *Relay) RelayOnce(ctx context.Context) (result, error) {
	return r.relayOnce(ctx, false)
}

// relayOnce is RelayOnce; with probe it first asks, outside any
// transaction, whether a row is claimable at all, so an idle relay's polls
// cost one statement and no transaction id.
//
// A cycle costs two round trips to PostgreSQL: BEGIN travels with the
// claim, which also returns each aggregate's pending rows up to its last
// claimed one, and COMMIT travels with the outcome. (It was five: begin,
// claim, ordering probe, outcome, commit, for every batch however small.)
func (r *Relay) relayOnce(ctx context.Context, probe bool) (result, error) {
	res, next, err := r.cycle(ctx, probe, nil)
	if next != nil {
		// One batch, finished: a full one is left in flight.
		o := <-next
		res.Published, res.Failed = o.res.Published, o.res.Failed
		err = o.err
	}
	return res, err
}

// outcome is what finishing a batch gave.
type outcome struct {
	res result
	err error
}

// cycle claims and sends a batch, then collects the outcome of the batch
// sent before it (ahead, nil if none), whose confirms and outcome were
// awaited and recorded meanwhile on its own transaction. A full batch
// that follows a clean one is left in flight the same way: the returned
// channel gives its outcome, and the caller must collect it (the next
// cycle does). So while the broker confirms one batch, PostgreSQL records
// the one before and claims the one after: the stages, each waiting on the
// other, left the broker idle for more than a third of a drain.
//
// The batch in flight keeps its rows locked and pending until it commits,
// which is what keeps order: the next claim skips them (SKIP LOCKED) and
// holds back every later row of their aggregates (inOrder), as another
// worker's claim would. The next claim but one waits for that commit
// (collecting ahead first), so those rows are not held back twice.
// The result counts the rows claimed (and deferred) now and the rows
// published or failed by the batches finished now.
func (r *Relay) cycle(ctx context.Context, probe bool, ahead <-chan outcome) (res result, next <-chan outcome, err error) {
	b, err := r.claimAndSend(ctx, probe)
	if ahead != nil {
		o := <-ahead
		res.Published, res.Failed = o.res.Published, o.res.Failed
		err = errors.Join(o.err, err)
	}
	if b == nil {
		return res, nil, err
	}
	res.Claimed, res.Deferred = b.claimed, b.claimed-len(b.rows)
	if err == nil && res.Failed == 0 && b.claimed == r.opts.BatchSize {
		out := make(chan outcome, 1)
		go func() {
			o, err := r.finish(ctx, b)
			out <- outcome{o, err}
		}()
		return res, out, nil
	}
	o, ferr := r.finish(ctx, b)
	res.Published += o.Published
	res.Failed += o.Failed
	return res, nil, errors.Join(err, ferr)
}

// sent is a batch claimed and sent, whose transaction holds its rows.
type sent struct {
	conn    *pgxpool.Conn
	claimed int
	rows    []*row // the rows sent, in order
	pctx    context.Context
	cancel  context.CancelFunc
}

// claimAndSend claims a batch and sends the rows inOrder keeps, pipelined
// on the publisher's channel, which keeps their order. It returns nil
// when nothing was claimed (the transaction is over then), else the open
// batch for finish, even on a send error: finish records it.
func (r *Relay) claimAndSend(ctx context.Context, probe bool) (*sent, error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox relay: acquire: %w", err)
	}
	if probe {
		found, err := r.probe(ctx, conn.Conn())
		if err != nil || !found {
			conn.Release()
			return nil, err
		}
	}
	batch, err := r.claim(ctx, conn.Conn())
	if err != nil {
		r.release(ctx, conn)
		return nil, err
	}
	if len(batch) == 0 {
		_, err := conn.Exec(ctx, "COMMIT")
		r.release(ctx, conn)
		if err != nil {
			return nil, fmt.Errorf("outbox relay: commit: %w", err)
		}
		return nil, nil
	}
	b := &sent{conn: conn, claimed: len(batch), rows: inOrder(batch)}
	if r.opts.Faults != nil {
		r.opts.Faults.Hit("relay.after-claim")
	}
	b.pctx, b.cancel = context.WithTimeout(ctx, r.opts.ConfirmTimeout)
	for _, rw := range b.rows {
		rw.pending, rw.span, rw.err = r.send(b.pctx, rw)
	}
	return b, nil
}

// release ends the connection's transaction if a failure left it open or
// aborted, or drops the connection rather than pool it in that state.
func (r *Relay) release(ctx context.Context, conn *pgxpool.Conn) {
	defer conn.Release()
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
		conn.Conn().Close(rctx)
	}
}

// finish waits for the confirms of a batch claimAndSend sent and records
// the outcome in its transaction. Rows are marked published only after
// their confirm; unroutable, nacked or unconfirmed rows get an attempt,
// the error and a later next_attempt_at.
func (r *Relay) finish(ctx context.Context, b *sent) (res result, err error) {
	defer r.release(ctx, b.conn)
	defer b.cancel()
	failedAgg := map[[2]string]bool{}
	for _, rw := range b.rows {
		if rw.err == nil {
			rw.err = rw.pending.Wait(b.pctx)
		}
		if rw.err != nil {
			rw.span.SetStatus(codes.Error, rw.err.Error())
		}
		rw.span.End()
		key := [2]string{rw.aggType, rw.aggID}
		if rw.err == nil && failedAgg[key] {
			// An earlier row of this aggregate failed: this one went out
			// ahead of it. It stays confirmed (consumers dedupe by id);
			// the earlier one follows on retry. Rare: needs a nack or
			// return in the middle of an aggregate's run.
			r.log.Warn("outbox: aggregate published out of order after a failure", "aggregate", key, "id", rw.id)
		}
		if rw.err != nil {
			failedAgg[key] = true
		}
	}
	if r.opts.Faults != nil {
		r.opts.Faults.Hit("relay.after-confirm")
	}

	var published []int64
	upd := &pgx.Batch{}
	for _, rw := range b.rows {
		if rw.err == nil {
			published = append(published, rw.seq)
			continue
		}
		res.Failed++
		delay := r.retryDelay(rw.attempts + 1)
		upd.Queue(`UPDATE `+r.table()+` SET publication_attempts = publication_attempts + 1,
			last_error = $2, next_attempt_at = now() + $3::interval WHERE seq = $1`,
			rw.seq, text.Truncate(rw.err.Error(), 2000), fmt.Sprintf("%d milliseconds", delay.Milliseconds()))
	}
	if len(published) > 0 {
		upd.Queue(`UPDATE `+r.table()+` SET published_at = clock_timestamp(), publication_attempts = publication_attempts + 1,
			last_error = NULL, next_attempt_at = NULL WHERE seq = ANY($1)`, published)
	}
	upd.Queue("COMMIT")
	// The outcome is recorded even if ctx was cancelled meanwhile: the
	// confirms are real.
	wctx := context.WithoutCancel(ctx)
	if err := b.conn.SendBatch(wctx, upd).Close(); err != nil {
		return res, fmt.Errorf("outbox relay: record outcome: %w", err)
	}
	if b.conn.Conn().PgConn().TxStatus() != 'I' {
		return res, errors.New("outbox relay: record outcome: the transaction did not commit")
	}
	res.Published = len(published)
	return res, nil
}

// claimable selects the rows a relay may claim now. It repeats the
// predicate of outbox_event_claimable (attempts >= 0 is always true) so the
// claim and the idle probe use that index, and the per-aggregate ordering
// probe, which does not repeat it, cannot (migration 00004).
const claimable = `published_at IS NULL AND publication_attempts >= 0
	AND (next_attempt_at IS NULL OR next_attempt_at <= now())`

// claim opens the cycle's transaction and locks up to BatchSize claimable
// rows in seq order, in one round trip. The first row of each aggregate in
// the batch also carries the seqs of the aggregate's pending rows up to its
// last row in the batch (locked elsewhere, waiting for a retry, or in this
// batch): one index range per aggregate, however many of its rows the
// batch holds.
func (r *Relay) claim(ctx context.Context, conn *pgx.Conn) ([]*row, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The claim reads every tenant's rows: platform scope for the outbox's
	// row-level security (fabric migration 00013).
	b.Queue(wire.PlatformScope)
	// The claim must walk the claimable index in seq order and stop at
	// the batch's end. With statistics older than the backlog (a table
	// not analysed since it filled: a new one, or after the broker was
	// down) the planner expected a handful of rows and chose a bitmap scan
	// of every pending row and a sort (external, 16 MB, for 20,000 rows),
	// for every batch: 40-140 ms a claim and half of PostgreSQL's CPU in a
	// drain. Without bitmap scans the ordered index scan is the cheapest
	// plan whatever the estimate.
	b.Queue("SET LOCAL enable_bitmapscan = off")
	// The table is qualified instead of setting search_path: one statement
	// fewer per batch.
	b.Queue(`WITH claimed AS MATERIALIZED (
			SELECT seq, id, aggregate_type, aggregate_id, exchange, routing_key, event_type,
			       headers, body, occurred_at, publication_attempts
			FROM `+r.table()+`
			WHERE `+claimable+`
			ORDER BY seq
			LIMIT $1
			FOR UPDATE SKIP LOCKED),
		aggregates AS (
			SELECT DISTINCT ON (aggregate_type, aggregate_id) seq AS first,
			       max(seq) OVER (PARTITION BY aggregate_type, aggregate_id) AS last
			FROM claimed
			ORDER BY aggregate_type, aggregate_id, seq)
		SELECT c.seq, c.id::text, c.aggregate_type, c.aggregate_id, c.exchange, c.routing_key, c.event_type,
		       c.headers::text, c.body, c.occurred_at, c.publication_attempts,
		       CASE WHEN a.first IS NOT NULL THEN coalesce((
		           SELECT array_agg(o.seq ORDER BY o.seq) FROM `+r.table()+` o
		           WHERE o.aggregate_type = c.aggregate_type AND o.aggregate_id = c.aggregate_id
		             AND o.published_at IS NULL AND o.seq <= a.last), '{}') END
		FROM claimed c LEFT JOIN aggregates a ON a.first = c.seq
		ORDER BY c.seq`, r.opts.BatchSize)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	for range 3 { // BEGIN, the scope, the plan
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("outbox relay: begin: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("outbox relay: claim: %w", err)
	}
	var batch []*row
	for rows.Next() {
		rw := &row{}
		var headers string
		if err := rows.Scan(&rw.seq, &rw.id, &rw.aggType, &rw.aggID, &rw.exchange, &rw.routingKey, &rw.eventType,
			&headers, &rw.body, &rw.occurredAt, &rw.attempts, &rw.aggPending); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox relay: scan: %w", err)
		}
		rw.headers = []byte(headers)
		batch = append(batch, rw)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox relay: claim: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("outbox relay: claim: %w", err)
	}
	return batch, nil
}

// inOrder keeps, for each aggregate, only the rows of batch (in seq order)
// that form an unbroken run from the aggregate's oldest pending row. A row
// is dropped when an earlier pending row of its aggregate is not in the
// batch: another relay holds it (SKIP LOCKED leaves gaps) or it waits for
// a retry. Dropped rows are released untouched at commit.
func inOrder(batch []*row) []*row {
	type agg = [2]string
	// Both lists are in seq order: a row is kept while the aggregate's
	// rows in the batch match its pending rows one for one.
	pending := map[agg][]int64{}
	next := map[agg]int{}
	out := batch[:0]
	for _, rw := range batch {
		k := agg{rw.aggType, rw.aggID}
		if rw.aggPending != nil {
			pending[k] = rw.aggPending
		}
		// At a gap the index stops on the missing row, which no later row
		// of the batch can match: the aggregate's later rows wait too.
		i := next[k]
		if i >= len(pending[k]) || pending[k][i] != rw.seq {
			continue
		}
		next[k] = i + 1
		out = append(out, rw)
	}
	return out
}

// send publishes one row inside a producer span that continues the trace
// of the transaction that enqueued it; the caller ends the span.
func (r *Relay) send(ctx context.Context, rw *row) (*broker.Pending, trace.Span, error) {
	headers, err := storedHeaders(rw.headers)
	if err != nil {
		return nil, noop.Span{}, fmt.Errorf("outbox row %s: headers: %w", rw.id, err)
	}
	// The row stores the properties to send beside the headers: the
	// correlation id, and a codec's type (else the row's). Rows written
	// before the correlation was stored carry it as the x-correlation-id
	// header, sent as it was.
	correlationID, ok := headers[wire.StoredCorrelation].(string)
	if !ok {
		correlationID, _ = headers["x-correlation-id"].(string)
	}
	typ := rw.eventType
	if v, ok := headers[wire.StoredType].(string); ok {
		typ = v
	}
	delete(headers, wire.StoredType)
	delete(headers, wire.StoredCorrelation)
	pctx := telemetry.Propagator().Extract(ctx, telemetry.HeaderCarrier(headers))
	pctx, span := r.tracer.Start(pctx, "publish "+rw.eventType, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "rabbitmq"),
			attribute.String("messaging.destination.name", rw.exchange),
			attribute.String("messaging.message.id", rw.id)))
	delete(headers, "traceparent")
	delete(headers, "tracestate")
	pd, err := r.pub.Send(pctx, broker.Message{
		Exchange: rw.exchange, RoutingKey: rw.routingKey, Body: rw.body, MessageID: rw.id,
		CorrelationID: correlationID, Type: typ, Headers: headers, Timestamp: rw.occurredAt,
	})
	return pd, span, err
}

// storedHeaders reads a row's headers: strings (every header of the
// platform's envelope), and the numbers and booleans of other codecs
// (imóveis' x-schema-version), an integer as int32 when it fits, as a
// codec writes it.
func storedHeaders(raw []byte) (amqp.Table, error) {
	var stored map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&stored); err != nil {
		return nil, err
	}
	headers := amqp.Table{}
	for k, v := range stored {
		switch v := v.(type) {
		case string, bool:
			headers[k] = v
		case json.Number:
			if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				if i >= math.MinInt32 && i <= math.MaxInt32 {
					headers[k] = int32(i)
				} else {
					headers[k] = i
				}
			} else if f, err := v.Float64(); err == nil {
				headers[k] = f
			} else {
				return nil, fmt.Errorf("header %s: %w", k, err)
			}
		default:
			return nil, fmt.Errorf("header %s: %T is not a string, number or boolean", k, v)
		}
	}
	return headers, nil
}

func (r *Relay) retryDelay(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 16)
	d = min(d, r.opts.MaxBackoff)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// DeletePublished deletes rows published before now-age, in batches of
// RetentionBatch so no single statement holds locks for long. It returns
// the number of rows deleted.
func (r *Relay) DeletePublished(ctx context.Context, age time.Duration) (int64, error) {
	var total int64
	for {
		var n int64
		err := crosstenant.Tx(ctx, r.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE seq IN (
				SELECT seq FROM %s WHERE published_at IS NOT NULL AND published_at < now() - $1::interval
				ORDER BY published_at LIMIT $2)`, r.table(), r.table()),
				fmt.Sprintf("%d milliseconds", age.Milliseconds()), r.opts.RetentionBatch)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("outbox retention: %w", err)
		}
		total += n
		if n < int64(r.opts.RetentionBatch) || ctx.Err() != nil {
			return total, nil
		}
	}
}

// Pending returns how many rows wait to be published.
func (r *Relay) Pending(ctx context.Context) (int64, error) {
	var n int64
	err := crosstenant.Tx(ctx, r.pool, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT count(*) FROM "+r.table()+" WHERE published_at IS NULL").Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("outbox pending: %w", err)
	}
	return n, nil
}

func (r *Relay) table() string { return pgx.Identifier{r.schema, "outbox_event"}.Sanitize() }

var _ Sender = (*broker.Publisher)(nil)
