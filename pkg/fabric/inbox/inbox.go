package inbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/crosstenant"
	"github.com/agora-platform/agora/pkg/fabric/internal/pipetx"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// errConflict: an event id arrived again with another payload or tenant.
// The message is dead-lettered (class invalid) and a security event kept.
var errConflict = errors.New("inbox: event id reused with a different payload or tenant")

// faults lets crash tests stop at a named point; nil in production.
// Points: "inbox.after-claim", "inbox.after-commit".
type faults interface {
	Hit(point string)
}

// Options tune an Inbox.
type Options struct {
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
	Faults  faults
}

// Inbox records processed events for one consumer in one schema.
type Inbox struct {
	pool     *pgxpool.Pool
	schema   string
	consumer string
	table    string // <schema>.inbox_message, quoted
	opts     Options
	log      *slog.Logger
}

// New returns the inbox of consumer (its queue name) in schema.
func New(pool *pgxpool.Pool, schema, consumer string, opts Options) *Inbox {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics, _ = telemetry.NewMetrics(nil)
	}
	return &Inbox{pool: pool, schema: schema, consumer: consumer, opts: opts, log: log,
		table: pgx.Identifier{schema, "inbox_message"}.Sanitize()}
}

// payloadHash is the SHA-256 of the payload in compact form, so whitespace
// never makes the same event look different.
func payloadHash(payload []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		buf.Reset()
		buf.Write(payload)
	}
	sum := sha256.Sum256(buf.Bytes())
	return sum[:]
}

// Claim inserts (consumer, event id) in tx. It returns true when this is
// the first time; false for a duplicate with the same payload and tenant;
// and ErrConflict (after recording a security event outside tx) when the id
// was seen with another payload or tenant.
func (in *Inbox) Claim(ctx context.Context, tx pgx.Tx, env envelope.Envelope) (bool, error) {
	return in.claim(ctx, tx, env, false)
}

// claim is Claim; with setup it also sets the transaction's search_path and
// app.tenant_id in the same round trip (the handler path: one round trip
// fewer per message).
func (in *Inbox) claim(ctx context.Context, tx pgx.Tx, env envelope.Envelope, setup bool) (bool, error) {
	if !setup {
		return in.claimAfter(ctx, tx, env)
	}
	return in.claimAfter(ctx, tx, env, in.settings(env))
}

// statement is one statement queued ahead of a claim, in its round trip.
type statement struct {
	sql  string
	args []any
}

// settings points the transaction at the schema and env's tenant.
func (in *Inbox) settings(env envelope.Envelope) statement {
	return statement{"SELECT set_config('search_path', $1, true), set_config('app.tenant_id', $2, true)",
		[]any{in.schema, env.TenantID}}
}

// The claims table is under row-level security (fabric migration 00013),
// and a claim must see every tenant's: a batch claims several tenants' ids
// in one statement, and an id reused under another tenant is a conflict to
// report, not a row to miss. So the claim statements run in platform scope
// and leave the transaction as they found it, scoped to the tenant the
// handler's work belongs to (wire.EndPlatformScope).

// claimAfter runs before, then inserts (consumer, event id), all in one
// round trip, and tells a first claim from a duplicate or a conflict.
func (in *Inbox) claimAfter(ctx context.Context, tx pgx.Tx, env envelope.Envelope, before ...statement) (bool, error) {
	hash := payloadHash(env.Payload)
	var tenantID *string
	if env.TenantID != "" {
		tenantID = &env.TenantID
	}
	b := &pgx.Batch{}
	for _, st := range before {
		b.Queue(st.sql, st.args...)
	}
	// Qualified: a batch may parse this before a set_config above runs.
	var correlationID *string
	if env.CorrelationID != "" {
		correlationID = &env.CorrelationID
	}
	b.Queue(wire.PlatformScope)
	b.Queue(`INSERT INTO `+in.table+` (consumer, event_id, tenant_id, event_type, payload_hash, correlation_id)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (consumer, event_id) DO NOTHING`,
		in.consumer, env.ID, tenantID, env.Type, hash, correlationID)
	b.Queue(wire.EndPlatformScope)
	br := tx.SendBatch(ctx, b)
	for range len(before) + 1 {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return false, fmt.Errorf("inbox: before claiming %s: %w", env.ID, err)
		}
	}
	tag, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("inbox claim %s: %w", env.ID, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	return in.duplicate(ctx, tx, env, tenantID, hash)
}

// duplicate tells a redelivery (same tenant and payload: false, nil) from
// an id reused for something else (ErrConflict, after recording a security
// event outside tx, which the caller rolls back).
func (in *Inbox) duplicate(ctx context.Context, tx pgx.Tx, env envelope.Envelope, tenantID *string, hash []byte) (bool, error) {
	var firstTenant *string
	var firstHash []byte
	err := inScope(ctx, tx, func() error {
		return tx.QueryRow(ctx, `SELECT tenant_id, payload_hash FROM `+in.table+` WHERE consumer = $1 AND event_id = $2`,
			in.consumer, env.ID).Scan(&firstTenant, &firstHash)
	})
	if err != nil {
		return false, fmt.Errorf("inbox claim %s: read first claim: %w", env.ID, err)
	}
	sameTenant := sameTenant(firstTenant, tenantID)
	if sameTenant && bytes.Equal(firstHash, hash) {
		return false, nil
	}
	reason := "payload differs"
	if !sameTenant {
		reason = "tenant differs"
	}
	// Recorded on the pool, not tx: the handler's transaction rolls back.
	err = crosstenant.Tx(ctx, in.pool, func(rec pgx.Tx) error {
		_, err := rec.Exec(ctx, fmt.Sprintf(`INSERT INTO %s
			(consumer, event_id, event_type, tenant_id, first_tenant_id, payload_hash, first_hash, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, pgx.Identifier{in.schema, "inbox_security_event"}.Sanitize()),
			in.consumer, env.ID, env.Type, tenantID, firstTenant, hash, firstHash, reason)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("inbox claim %s: record security event: %w", env.ID, err)
	}
	in.log.Error("inbox: event id reused", "id", env.ID, "reason", reason, "tenant", env.TenantID)
	return false, fmt.Errorf("%w: %s: %s", errConflict, env.ID, reason)
}

// inScope runs fn's statements on tx in platform scope, then ends it.
func inScope(ctx context.Context, tx pgx.Tx, fn func() error) error {
	if _, err := tx.Exec(ctx, wire.PlatformScope); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, wire.EndPlatformScope)
	return err
}

// Handler returns the one-call path a service uses: begin a transaction
// (search_path = the schema, app.tenant_id = the envelope's tenant for
// row-level security), claim the event, run h, commit — after which the
// consumer acks. A duplicate commits nothing and is acked.
func (in *Inbox) Handler(h fabric.TxHandler) fabric.Handler {
	return func(ctx context.Context, env envelope.Envelope) error {
		tx, err := pipetx.Begin(ctx, in.pool)
		if err != nil {
			return fmt.Errorf("%w: inbox: begin: %w", fabric.ErrUnavailable, err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		first, err := in.claim(ctx, tx, env, true)
		if errors.Is(err, errConflict) {
			return fabric.Invalid(fabric.WithReason(err, wire.ReasonInboxConflict))
		}
		if err != nil {
			return fabric.Transient(err)
		}
		if !first {
			in.opts.Metrics.Duplicates.Add(ctx, 1, telemetry.Attrs(in.consumer, env.Type))
			return nil
		}
		if in.opts.Faults != nil {
			in.opts.Faults.Hit("inbox.after-claim")
		}
		if err := h(ctx, tx, env); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return fabric.Transient(fmt.Errorf("inbox: commit %s: %w", env.ID, err))
		}
		if in.opts.Faults != nil {
			in.opts.Faults.Hit("inbox.after-commit")
		}
		return nil
	}
}

// BatchHandler is Handler for many messages in one transaction, the
// consumer's path under load: one BEGIN and one COMMIT (one WAL flush)
// serve the whole batch. It first runs the batch together: one statement
// claims every message, the handlers run in turn (app.tenant_id set to
// each message's tenant) and one commit ends it. At the first message that
// fails or reuses an id, that attempt is rolled back and the batch runs
// again one message per savepoint, so each message's failure rolls back
// its own claim and effects and is classified alone while the others
// commit. The results are final only after the commit: if the commit
// fails, every message that would have been acked gets a transient error
// instead, and nothing is acked.
//
// A handler may therefore run twice for one delivery, the first time in a
// transaction that is rolled back: whatever it does outside the
// transaction must bear that, as it must bear a redelivery.
func (in *Inbox) BatchHandler(h fabric.TxHandler) fabric.BatchHandler {
	single := in.Handler(h)
	return func(ctx context.Context, batch []fabric.Received) []error {
		if len(batch) == 1 {
			// No savepoint for a batch of one: a row updated in a
			// subtransaction makes every transaction waiting on it consult
			// pg_subtrans, which on hot rows (analytics' counters) tripled
			// latency at 60 req/s.
			return []error{single(batch[0].Ctx, batch[0].Env)}
		}
		if errs, ok := in.together(ctx, batch, h); ok {
			return errs
		}
		in.opts.Metrics.BatchRetried.Add(ctx, 1, telemetry.Attrs(in.consumer, batch[0].Env.Type))
		return in.oneByOne(ctx, batch, h)
	}
}

// all is errs with err for every message of a batch of n.
func all(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// together runs batch in one transaction without savepoints: a round trip
// sets the schema and the first tenant and claims every message, each
// first claim's handler runs, and one commit ends it. Savepoints cost
// three statements per message and a subtransaction id for every message
// that writes, which every commit and snapshot then carries. ok is false
// when a handler failed or an id was reused: everything is rolled back
// and the caller runs the batch again one message at a time.
func (in *Inbox) together(ctx context.Context, batch []fabric.Received, h fabric.TxHandler) (errs []error, ok bool) {
	tx, err := pipetx.Begin(ctx, in.pool)
	if err != nil {
		return all(len(batch), fmt.Errorf("%w: inbox: begin: %w", fabric.ErrUnavailable, err)), true
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	n := len(batch)
	ids, types := make([]string, n), make([]string, n)
	tenants, correlations := make([]*string, n), make([]*string, n)
	hashes := make([][]byte, n)
	for i, m := range batch {
		ids[i], types[i], hashes[i] = m.Env.ID, m.Env.Type, payloadHash(m.Env.Payload)
		if m.Env.TenantID != "" {
			tenants[i] = &m.Env.TenantID
		}
		if m.Env.CorrelationID != "" {
			correlations[i] = &m.Env.CorrelationID
		}
	}
	b := &pgx.Batch{}
	first := in.settings(batch[0].Env)
	b.Queue(first.sql, first.args...)
	b.Queue(wire.PlatformScope)
	b.Queue(`INSERT INTO `+in.table+` (consumer, event_id, tenant_id, event_type, payload_hash, correlation_id)
		SELECT $1, id::uuid, tenant, type, hash, correlation
		FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[]) AS m(id, tenant, type, hash, correlation)
		ON CONFLICT (consumer, event_id) DO NOTHING
		RETURNING event_id`, in.consumer, ids, tenants, types, hashes, correlations)
	b.Queue(wire.EndPlatformScope)
	br := tx.SendBatch(ctx, b)
	for range 2 { // the settings, the scope
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, false
		}
	}
	claimed := map[[16]byte]bool{}
	rows, err := br.Query()
	if err == nil {
		var id [16]byte
		_, err = pgx.ForEachRow(rows, []any{&id}, func() error { claimed[id] = true; return nil })
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false // the one-at-a-time path says which message it was
	}
	// A message is first when its id was inserted and no earlier message
	// of the batch took that claim; the others are redeliveries, unless
	// their tenant or payload differ from the claim's.
	runs := make([]bool, n)
	var again []int
	for i, m := range batch {
		u, err := uuid.Parse(m.Env.ID)
		if err != nil {
			return nil, false
		}
		if claimed[u] {
			runs[i], claimed[u] = true, false
		} else {
			again = append(again, i)
		}
	}
	if len(again) > 0 && !in.sameAsClaimed(ctx, tx, batch, hashes, again) {
		return nil, false
	}
	tenantSet := batch[0].Env.TenantID
	for i, m := range batch {
		if !runs[i] {
			continue
		}
		if m.Env.TenantID != tenantSet {
			st := in.settings(m.Env)
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return nil, false
			}
			tenantSet = m.Env.TenantID
		}
		if in.opts.Faults != nil {
			in.opts.Faults.Hit("inbox.after-claim")
		}
		if err := h(m.Ctx, tx, m.Env); err != nil {
			return nil, false
		}
	}
	if err := tx.Commit(ctx); err != nil {
		var deferred *pipetx.DeferredError
		if errors.As(err, &deferred) {
			return nil, false // a handler's deferred write: the one-at-a-time path says whose
		}
		return all(n, fabric.Transient(fmt.Errorf("inbox: commit batch of %d: %w", n, err))), true
	}
	if in.opts.Faults != nil {
		in.opts.Faults.Hit("inbox.after-commit")
	}
	for _, i := range again {
		in.opts.Metrics.Duplicates.Add(batch[i].Ctx, 1, telemetry.Attrs(in.consumer, batch[i].Env.Type))
	}
	return make([]error, n), true
}

// sameAsClaimed reports whether every message at the indexes of again has
// the tenant and payload of the claim its id already has: a redelivery,
// skipped without running its handler. Anything else (a reused id, an
// error) is for the one-at-a-time path to classify.
func (in *Inbox) sameAsClaimed(ctx context.Context, tx pgx.Tx, batch []fabric.Received, hashes [][]byte, again []int) bool {
	ids := make([]string, len(again))
	for k, i := range again {
		ids[k] = batch[i].Env.ID
	}
	type claim struct {
		tenant *string
		hash   []byte
	}
	claims := map[[16]byte]claim{}
	err := inScope(ctx, tx, func() error {
		rows, err := tx.Query(ctx, `SELECT event_id, tenant_id, payload_hash FROM `+in.table+`
			WHERE consumer = $1 AND event_id = ANY($2::text[]::uuid[])`, in.consumer, ids)
		if err != nil {
			return err
		}
		var id [16]byte
		var c claim
		_, err = pgx.ForEachRow(rows, []any{&id, &c.tenant, &c.hash}, func() error { claims[id] = c; return nil })
		return err
	})
	if err != nil {
		return false
	}
	for _, i := range again {
		env := batch[i].Env
		c, found := claims[uuid.MustParse(env.ID)]
		var tenantID *string
		if env.TenantID != "" {
			tenantID = &env.TenantID
		}
		if !found || !bytes.Equal(c.hash, hashes[i]) || !sameTenant(c.tenant, tenantID) {
			return false
		}
	}
	return true
}

// sameTenant reports whether two claims' tenants (nil: none) are the same.
func sameTenant(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// oneByOne runs batch in one transaction with a savepoint per message.
func (in *Inbox) oneByOne(ctx context.Context, batch []fabric.Received, h fabric.TxHandler) []error {
	errs := make([]error, len(batch))
	fail := func(from int, err error) []error {
		for i := from; i < len(errs); i++ {
			errs[i] = err
		}
		return errs
	}
	// lost: the transaction is gone (connection lost, or a handler rolled
	// it back): nothing in it commits, so nobody may be acked.
	lost := func(from int, err error) []error {
		for j := range from {
			if errs[j] == nil {
				errs[j] = fabric.Transient(fmt.Errorf("inbox: batch lost: %w", err))
			}
		}
		return fail(from, fabric.Transient(fmt.Errorf("inbox: batch lost: %w", err)))
	}
	tx, err := pipetx.Begin(ctx, in.pool)
	if err != nil {
		return fail(0, fmt.Errorf("%w: inbox: begin: %w", fabric.ErrUnavailable, err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for i, m := range batch {
		// SAVEPOINT, and the previous message's RELEASE, ride with the claim.
		sp, err := tx.Begin(m.Ctx)
		if err != nil {
			return lost(i, err) // the handler before ended the transaction
		}
		first, err := in.claimAfter(m.Ctx, sp, m.Env, in.settings(m.Env))
		switch {
		case errors.Is(err, errConflict):
			errs[i] = fabric.Invalid(fabric.WithReason(err, wire.ReasonInboxConflict))
		case err != nil:
			errs[i] = fabric.Transient(err)
		case !first:
			in.opts.Metrics.Duplicates.Add(m.Ctx, 1, telemetry.Attrs(in.consumer, m.Env.Type))
		default:
			if in.opts.Faults != nil {
				in.opts.Faults.Hit("inbox.after-claim")
			}
			// The handler gets the transaction, not the savepoint: one
			// that rolls back to free its connection (communication,
			// before recording a failed attempt on the pool) must free
			// it, which ends the batch.
			errs[i] = h(m.Ctx, tx, m.Env)
			if errs[i] == nil {
				// The handler's deferred writes are its own: they must
				// fail here, not with the next message's claim.
				if err := tx.Flush(m.Ctx); err != nil {
					errs[i] = fabric.Transient(fmt.Errorf("inbox: %s: %w", m.Env.ID, err))
				}
			}
		}
		if errs[i] == nil {
			sp.Commit(m.Ctx) // a RELEASE, queued
			continue
		}
		if err := sp.Rollback(ctx); err != nil {
			return lost(i+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fabric.Transient(fmt.Errorf("inbox: commit batch of %d: %w", len(batch), err))
			}
		}
		return errs
	}
	if in.opts.Faults != nil {
		in.opts.Faults.Hit("inbox.after-commit")
	}
	return errs
}

// DeleteOlderThan removes claims older than age in batches of batch rows.
// Keep age well above the longest redelivery window (retry tiers, replay).
func (in *Inbox) DeleteOlderThan(ctx context.Context, age time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 5000
	}
	tbl := in.table
	var total int64
	for {
		var n int64
		err := crosstenant.Tx(ctx, in.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE (consumer, event_id) IN (
				SELECT consumer, event_id FROM %s WHERE consumer = $1 AND received_at < now() - $2::interval LIMIT $3)`, tbl, tbl),
				in.consumer, fmt.Sprintf("%d milliseconds", age.Milliseconds()), batch)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("inbox retention: %w", err)
		}
		total += n
		if n < int64(batch) || ctx.Err() != nil {
			return total, nil
		}
	}
}
