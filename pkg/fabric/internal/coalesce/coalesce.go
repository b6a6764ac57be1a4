// Package coalesce turns a storm of events into one (seed 004 §50-52):
//
//   - Debounce: the events of one key keep a window open while they keep
//     coming (each one moves its end to Window later, never beyond MaxWait
//     after the first); when it closes, one event carries how many there
//     were and the last one's state ("10 changes within 5 seconds become
//     one").
//   - Aggregate: the events of one key within a fixed Window from the first
//     (or until MaxCount of them) become one summary ("RiskChanged × 20
//     becomes RiskSetUpdated").
//
// A consumer adds each event to its window inside its own transaction (the
// inbox's), so a redelivered event is never counted twice and a window
// survives a restart: its state is a row of coalesce_window in the
// service's schema. Flush, run by a worker, takes due windows with FOR
// UPDATE SKIP LOCKED and, in one transaction, enqueues the summary
// (platform.events-coalesced.v1) through the outbox and deletes the
// window: it is emitted once, by one instance. The summary derives from
// the last event (same correlation, causation = that event, the chain
// extended, so the depth and cycle limits still hold) and lists the ids
// it summarises.
package coalesce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/sweep"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

// Type is the summary's catalog type.
const Type = "platform.events-coalesced.v1"

// MaxIDs bounds the ids a summary lists (the newest are kept).
const MaxIDs = 100

// Mode is how a window closes.
type Mode string

const (
	Debounce  Mode = "debounce"
	Aggregate Mode = "aggregate"
)

// Rule is one coalescing rule of a service.
type Rule struct {
	Name   string
	Mode   Mode
	Window time.Duration
	// MaxWait (Debounce) bounds a window from its first event, so a key
	// that never goes quiet is still reported. Zero: 10 × Window.
	MaxWait time.Duration
	// MaxCount (Aggregate) closes a window early at this many events.
	// Zero: no early close.
	MaxCount int
}

func (r Rule) check() error {
	if r.Name == "" || r.Window <= 0 || (r.Mode != Debounce && r.Mode != Aggregate) || r.MaxWait < 0 || r.MaxCount < 0 {
		return fmt.Errorf("coalesce: rule %q: want a name, a positive window and mode debounce or aggregate", r.Name)
	}
	return nil
}

// Summary is platform.events-coalesced.v1's payload.
type Summary struct {
	Rule      string          `json:"rule"`
	Mode      Mode            `json:"mode"`
	Key       string          `json:"key"`
	Count     int             `json:"count"`
	FirstAt   time.Time       `json:"firstAt"`
	LastAt    time.Time       `json:"lastAt"`
	EventIDs  []string        `json:"eventIds"`
	Truncated bool            `json:"truncated,omitempty"`
	LastState json.RawMessage `json:"lastState"`
}

// Coalescer keeps the windows of one service's schema.
type Coalescer struct {
	pool     *pgxpool.Pool
	table    string
	outbox   *outbox.Outbox
	producer string
	rules    map[string]Rule
	now      func() time.Time
}

// New returns a Coalescer over schema's coalesce_window (fabric migration
// 00010), emitting summaries as producer through ob.
func New(pool *pgxpool.Pool, schema string, ob *outbox.Outbox, producer string, now func() time.Time, rules ...Rule) (*Coalescer, error) {
	c := &Coalescer{pool: pool, table: pgx.Identifier{schema, "coalesce_window"}.Sanitize(), outbox: ob, producer: producer,
		rules: map[string]Rule{}, now: now}
	for _, r := range rules {
		if err := r.check(); err != nil {
			return nil, err
		}
		if r.Mode == Debounce && r.MaxWait == 0 {
			r.MaxWait = 10 * r.Window
		}
		c.rules[r.Name] = r
	}
	return c, nil
}

// ErrUnknownRule: Add named a rule the Coalescer was not given.
var ErrUnknownRule = errors.New("coalesce: unknown rule")

// Add counts env in the window of (rule, env's tenant, key), with state as
// the window's latest state, inside tx: the caller's transaction, so the
// event counts once if and only if the caller's effect commits.
func (c *Coalescer) Add(ctx context.Context, tx pgx.Tx, rule, key string, env envelope.Envelope, state any) error {
	r, ok := c.rules[rule]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownRule, rule)
	}
	if env.TenantID == "" || key == "" {
		return fmt.Errorf("coalesce: %s: an event without a tenant or key cannot be coalesced", env.ID)
	}
	st, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("coalesce: state of %s: %w", env.ID, err)
	}
	body, err := env.Encode()
	if err != nil {
		return fmt.Errorf("coalesce: %s: %w", env.ID, err)
	}
	now := c.now().UTC()
	// A new window is due Window from now; an open one: debounce moves
	// its end to Window from now, capped at MaxWait after its first event;
	// aggregate keeps its end, or closes now at MaxCount events.
	maxCount := r.MaxCount
	if maxCount == 0 {
		maxCount = int(^uint32(0) >> 1)
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+c.table+` AS w
		(rule, tenant_id, key, count, first_at, last_at, due_at, last_state, event_ids, last_event)
		VALUES ($1, $2, $3, 1, $4, $4, $4::timestamptz + make_interval(secs => $5), $6, ARRAY[$7::uuid], $8)
		ON CONFLICT (rule, tenant_id, key) DO UPDATE SET
			count = w.count + 1,
			last_at = $4,
			last_state = $6,
			event_ids = (w.event_ids || $7::uuid)[greatest(1, cardinality(w.event_ids) + 2 - $11):],
			last_event = $8,
			due_at = CASE
				WHEN $9 = 'debounce' THEN least(w.first_at + make_interval(secs => $10), $4::timestamptz + make_interval(secs => $5))
				WHEN w.count + 1 >= $12 THEN $4::timestamptz
				ELSE w.due_at END`,
		r.Name, env.TenantID, key, now, r.Window.Seconds(), st, env.ID, body, string(r.Mode), r.MaxWait.Seconds(), MaxIDs, maxCount)
	if err != nil {
		return fmt.Errorf("coalesce: add %s to %s/%s: %w", env.ID, r.Name, key, err)
	}
	return nil
}

// Flush emits the summaries of up to limit due windows and returns how
// many it emitted.
func (c *Coalescer) Flush(ctx context.Context, limit int) (int, error) {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("coalesce: flush: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, `SELECT rule, tenant_id, key, count, first_at, last_at, last_state, event_ids::text[], last_event
		FROM `+c.table+` WHERE due_at <= $1 ORDER BY due_at LIMIT $2 FOR UPDATE SKIP LOCKED`, c.now().UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("coalesce: flush: due windows: %w", err)
	}
	type window struct {
		Summary
		tenant string
		last   []byte
	}
	var due []window
	for rows.Next() {
		var w window
		var state []byte
		if err := rows.Scan(&w.Rule, &w.tenant, &w.Key, &w.Count, &w.FirstAt, &w.LastAt, &state, &w.EventIDs, &w.last); err != nil {
			rows.Close()
			return 0, fmt.Errorf("coalesce: flush: %w", err)
		}
		w.LastState = state
		due = append(due, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("coalesce: flush: %w", err)
	}
	for _, w := range due {
		last, err := envelope.Decode(w.last, 0)
		if err != nil {
			return 0, fmt.Errorf("coalesce: flush %s/%s: the last event: %w", w.Rule, w.Key, err)
		}
		if r, ok := c.rules[w.Rule]; ok {
			w.Mode = r.Mode
		} else {
			w.Mode = Debounce // a rule this build no longer has: still reported, not lost
		}
		w.Truncated = w.Count > len(w.EventIDs)
		w.FirstAt, w.LastAt = w.FirstAt.UTC(), w.LastAt.UTC()
		sum, err := envelope.Derive(last, Type, c.producer, w.Summary)
		if err != nil {
			return 0, fmt.Errorf("coalesce: flush %s/%s: %w", w.Rule, w.Key, err)
		}
		if err := tenant.Set(ctx, tx, w.tenant); err != nil {
			return 0, err
		}
		if err := c.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "coalesce:" + w.Rule, ID: w.Key}, Envelope: sum}); err != nil {
			return 0, fmt.Errorf("coalesce: flush %s/%s: %w", w.Rule, w.Key, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+c.table+` WHERE rule = $1 AND tenant_id = $2 AND key = $3`, w.Rule, w.tenant, w.Key); err != nil {
			return 0, fmt.Errorf("coalesce: flush %s/%s: delete: %w", w.Rule, w.Key, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("coalesce: flush: commit: %w", err)
	}
	return len(due), nil
}

// Run flushes every interval until ctx ends (a full batch is followed at
// once by another). Errors go to onError and the next tick retries.
func (c *Coalescer) Run(ctx context.Context, interval time.Duration, batch int, onError func(error)) {
	sweep.Run(ctx, interval, batch, c.Flush, onError, nil)
}
