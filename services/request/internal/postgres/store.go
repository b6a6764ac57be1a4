// Package postgres stores requests, idempotency records and documents in
// the service's schema, and enqueues their events in the same transactions.
// Every transaction sets app.tenant_id for row-level security, and every
// query also filters by tenant (superusers, as in local runs and tests,
// bypass RLS).
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/request/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/request/internal/request"
)

// Enqueuer stores envelopes in the caller's transaction (outbox.Outbox).
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Store is the request service's Postgres adapter.
type Store struct {
	pool   *pgxpool.Pool
	outbox Enqueuer
	now    func() time.Time

	protoMu sync.Mutex
	protos  map[protocolKey][]protocolBlock
}

// protocolBlockSize is how many protocol numbers one reservation takes.
// Reserving them one by one inside each submission made every submission
// of a tenant wait on one counter row until the previous one committed:
// 8.5 ms of waiting per submission at 80 req/s, a ceiling near 100 req/s
// per tenant. A block is reserved in a short transaction of its own.
const protocolBlockSize = 16

type protocolKey struct {
	tenant string
	year   int
}

// protocolBlock holds the reserved numbers next..last not yet handed out.
type protocolBlock struct{ next, last int64 }

// New returns a Store on pool (search_path = the service schema).
func New(pool *pgxpool.Pool, ob Enqueuer, now func() time.Time) *Store {
	return &Store{pool: pool, outbox: ob, now: now, protos: map[protocolKey][]protocolBlock{}}
}

// nextProtocol returns tenant's next protocol number for year. Numbers are
// unique. One process hands out each block in order, but concurrent
// reservations may finish out of order, and other processes, restarts and
// failed submissions leave gaps (as with any database sequence).
func (s *Store) nextProtocol(ctx context.Context, tenantID string, year int) (int64, error) {
	k := protocolKey{tenantID, year}
	if n, ok := s.takeProtocol(k); ok {
		return n, nil
	}
	// Reserved without the lock: submissions that still find numbers are
	// not held up by this round trip, and concurrent reservations each add
	// a block; every number is handed out.
	var last int64
	err := s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		var err error
		last, err = q.ReserveProtocolNumbers(ctx, pgdb.ReserveProtocolNumbersParams{TenantID: tenantID, Year: int32(year), Count: protocolBlockSize})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reserve protocol numbers: %w", err)
	}
	s.protoMu.Lock()
	s.protos[k] = append(s.protos[k], protocolBlock{next: last - protocolBlockSize + 2, last: last})
	s.protoMu.Unlock()
	return last - protocolBlockSize + 1, nil
}

func (s *Store) takeProtocol(k protocolKey) (int64, bool) {
	s.protoMu.Lock()
	defer s.protoMu.Unlock()
	blocks := s.protos[k]
	for len(blocks) > 0 && blocks[0].next > blocks[0].last {
		blocks = blocks[1:]
	}
	s.protos[k] = blocks
	if len(blocks) == 0 {
		return 0, false
	}
	n := blocks[0].next
	blocks[0].next++
	return n, true
}

var _ request.DocumentStore = (*Store)(nil)

// inTenant runs fn in a transaction scoped to tenantID by row-level
// security.
func (s *Store) inTenant(ctx context.Context, tenantID string, fn func(tx pgx.Tx, q *pgdb.Queries) error) error {
	return tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error { return fn(tx, pgdb.New(tx)) })
}

// errKeyTaken: a concurrent request committed the same Idempotency-Key
// first; the caller re-reads its stored response.
var errKeyTaken = errors.New("idempotency key taken concurrently")

// Submit stores a new request from a's submission and enqueues
// request.submitted.v1 in one transaction, returning its receipt. With an
// idempotency key, a repeated key with the same body hash returns the
// stored receipt and replayed=true; another body returns
// request.ErrIdempotencyConflict.
func (s *Store) Submit(ctx context.Context, a request.Actor, sub request.Submission, key, bodyHash string) (rc request.Receipt, replayed bool, err error) {
	if key != "" {
		rc, found, err := s.storedReceipt(ctx, a, key, bodyHash)
		if err != nil || found {
			return rc, found, err
		}
	}
	rc, err = s.submit(ctx, a, sub, key, bodyHash)
	if errors.Is(err, errKeyTaken) {
		rc, found, err := s.storedReceipt(ctx, a, key, bodyHash)
		if err == nil && !found {
			err = fmt.Errorf("idempotency key %q vanished after a conflict", key)
		}
		return rc, found, err
	}
	return rc, false, err
}

func (s *Store) storedReceipt(ctx context.Context, a request.Actor, key, bodyHash string) (rc request.Receipt, found bool, err error) {
	err = s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		row, err := q.GetIdempotencyKey(ctx, pgdb.GetIdempotencyKeyParams{TenantID: a.TenantID, CitizenID: a.Subject, Key: key})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		if row.BodyHash != bodyHash {
			return request.ErrIdempotencyConflict
		}
		found = true
		if err := json.Unmarshal(row.Response, &rc); err != nil {
			return fmt.Errorf("decode stored response: %w", err)
		}
		return nil
	})
	return rc, found, err
}

func (s *Store) submit(ctx context.Context, a request.Actor, sub request.Submission, key, bodyHash string) (request.Receipt, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return request.Receipt{}, fmt.Errorf("request id: %w", err)
	}
	fields, err := json.Marshal(sub.Fields)
	if err != nil {
		return request.Receipt{}, fmt.Errorf("encode fields: %w", err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	r := request.Request{
		ID: id.String(), TenantID: a.TenantID, CitizenID: a.Subject, ServiceID: sub.ServiceID,
		FormID: sub.FormID, FormVersion: sub.FormVersion, Channel: sub.Channel, Fields: fields,
		Status: request.StatusSubmitted, SubmittedAt: now, UpdatedAt: now,
	}
	n, err := s.nextProtocol(ctx, a.TenantID, now.Year())
	if err != nil {
		return request.Receipt{}, err
	}
	r.Protocol = request.Protocol(now.Year(), n)
	var rc request.Receipt
	err = s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		env, err := request.SubmittedEvent(r, len(sub.Fields))
		if err != nil {
			return err
		}
		r.CorrelationID = env.CorrelationID
		if err := q.InsertRequest(ctx, pgdb.InsertRequestParams{
			ID: r.ID, TenantID: r.TenantID, Protocol: r.Protocol, CitizenID: r.CitizenID,
			ServiceID: r.ServiceID, FormID: r.FormID, FormVersion: int32(r.FormVersion),
			Channel: r.Channel, Fields: r.Fields, CorrelationID: r.CorrelationID, SubmittedAt: r.SubmittedAt,
		}); err != nil {
			return fmt.Errorf("insert request %s: %w", r.ID, err)
		}
		if err := s.enqueue(ctx, tx, q, r.ID, env); err != nil {
			return err
		}
		rc = request.Receipt{ID: r.ID, Protocol: r.Protocol, Status: r.Status, SubmittedAt: r.SubmittedAt}
		if key == "" {
			return nil
		}
		resp, err := json.Marshal(rc)
		if err != nil {
			return fmt.Errorf("encode receipt: %w", err)
		}
		claimed, err := q.ClaimIdempotencyKey(ctx, pgdb.ClaimIdempotencyKeyParams{
			TenantID: a.TenantID, CitizenID: a.Subject, Key: key, BodyHash: bodyHash,
			RequestID: r.ID, StatusCode: 201, Response: resp,
		})
		if err != nil {
			return fmt.Errorf("store idempotency key: %w", err)
		}
		if claimed == 0 {
			return errKeyTaken
		}
		return nil
	})
	return rc, err
}

func aggregate(requestID string) outbox.Aggregate {
	return outbox.Aggregate{Type: "request", ID: requestID}
}

// Get returns request id if a may see it, or request.ErrNotFound.
func (s *Store) Get(ctx context.Context, a request.Actor, id string) (request.Request, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return request.Request{}, request.ErrNotFound
	}
	// uuid.Parse also takes spellings PostgreSQL refuses ("urn:uuid:…"):
	// the query gets the canonical one.
	id = u.String()
	var r request.Request
	err = s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		row, err := q.GetRequest(ctx, pgdb.GetRequestParams{TenantID: a.TenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			return request.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("get request %s: %w", id, err)
		}
		r = fromRow(row)
		return nil
	})
	if err != nil {
		return request.Request{}, err
	}
	if !r.VisibleTo(a) {
		return request.Request{}, request.ErrNotFound
	}
	return r, nil
}

// List returns one page of the requests a may see, newest first: a
// citizen's own, or every request of a staff member's tenant.
func (s *Store) List(ctx context.Context, a request.Actor, p request.Page) ([]request.Request, error) {
	params := pgdb.ListRequestsParams{TenantID: a.TenantID, MaxRows: int32(p.Limit)}
	if !a.Attendant {
		params.CitizenID = &a.Subject
	}
	if p.Status != "" {
		st := string(p.Status)
		params.Status = &st
	}
	if p.After != nil {
		params.AfterAt, params.AfterID = &p.After.SubmittedAt, &p.After.ID
	}
	var out []request.Request
	err := s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListRequests(ctx, params)
		if err != nil {
			return fmt.Errorf("list requests: %w", err)
		}
		for _, row := range rows {
			out = append(out, fromRow(row))
		}
		return nil
	})
	return out, err
}

func fromRow(row pgdb.Request) request.Request {
	r := request.Request{
		ID: row.ID, TenantID: row.TenantID, Protocol: row.Protocol, CitizenID: row.CitizenID,
		ServiceID: row.ServiceID, FormID: row.FormID, FormVersion: int(row.FormVersion), Channel: row.Channel,
		Fields: row.Fields, Status: request.Status(row.Status), SLABreachedAt: row.SlaBreachedAt,
		CorrelationID: row.CorrelationID, SubmittedAt: row.SubmittedAt, UpdatedAt: row.UpdatedAt,
	}
	if row.StatusReason != nil {
		r.StatusReason = *row.StatusReason
	}
	return r
}

// AddDocument records d for r and enqueues document.uploaded.v1 in one
// transaction.
func (s *Store) AddDocument(ctx context.Context, a request.Actor, r request.Request, d request.Document) error {
	env, err := request.UploadedEvent(r, d)
	if err != nil {
		return err
	}
	return s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		if err := q.InsertDocument(ctx, pgdb.InsertDocumentParams{
			ID: d.ID, TenantID: r.TenantID, RequestID: r.ID, Bucket: d.Bucket, ObjectKey: d.ObjectKey,
			FileName: d.FileName, ContentType: d.ContentType, SizeBytes: d.Size, Sha256: d.SHA256,
			UploadedBy: d.UploadedBy, UploadedAt: d.UploadedAt,
		}); err != nil {
			return fmt.Errorf("insert document %s: %w", d.ID, err)
		}
		if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "document", ID: d.ID}, Envelope: env}); err != nil {
			return fmt.Errorf("enqueue %s for document %s: %w", env.Type, d.ID, err)
		}
		return appendTimeline(ctx, tx, r.TenantID, r.ID, env)
	})
}

// Documents lists the documents of request id if a may see it, or returns
// request.ErrNotFound.
func (s *Store) Documents(ctx context.Context, a request.Actor, id string) ([]request.Document, error) {
	r, err := s.Get(ctx, a, id)
	if err != nil {
		return nil, err
	}
	var out []request.Document
	err = s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListDocuments(ctx, pgdb.ListDocumentsParams{TenantID: a.TenantID, RequestID: r.ID})
		if err != nil {
			return fmt.Errorf("list documents of %s: %w", r.ID, err)
		}
		out = make([]request.Document, 0, len(rows))
		for _, d := range rows {
			out = append(out, request.Document{ID: d.ID, RequestID: d.RequestID, Bucket: d.Bucket,
				ObjectKey: d.ObjectKey, FileName: d.FileName, ContentType: d.ContentType, Size: d.SizeBytes,
				SHA256: d.Sha256, UploadedBy: d.UploadedBy, UploadedAt: d.UploadedAt})
		}
		return nil
	})
	return out, err
}

// Cancel cancels request id for its citizen a: the status moves to
// cancelled and request.cancelled.v1, with request.status-changed.v1
// caused by it, is enqueued in the same transaction. Cancelling a cancelled
// request changes nothing and returns it (the citizen may retry); a
// completed or rejected one is request.ErrNotCancellable. Only the citizen
// who submitted it may cancel: anyone else gets request.ErrNotFound.
func (s *Store) Cancel(ctx context.Context, a request.Actor, id, reason string) (request.Request, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return request.Request{}, request.ErrNotFound
	}
	var r request.Request
	err = s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		row, err := q.GetRequestForUpdate(ctx, pgdb.GetRequestForUpdateParams{TenantID: a.TenantID, ID: u.String()})
		if errors.Is(err, pgx.ErrNoRows) {
			return request.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("lock request %s: %w", id, err)
		}
		r = fromRow(row)
		if r.TenantID != a.TenantID || r.CitizenID != a.Subject {
			return request.ErrNotFound
		}
		if r.Status == request.StatusCancelled {
			return nil
		}
		if !r.Status.Cancellable() {
			return request.ErrNotCancellable
		}
		previous := r.Status
		r.Status, r.StatusReason, r.UpdatedAt = request.StatusCancelled, reason, s.now().UTC().Truncate(time.Microsecond)
		var why *string
		if reason != "" {
			why = &reason
		}
		if err := q.UpdateStatus(ctx, pgdb.UpdateStatusParams{TenantID: a.TenantID, ID: r.ID, Status: string(r.Status),
			StatusReason: why, UpdatedAt: r.UpdatedAt}); err != nil {
			return fmt.Errorf("cancel request %s: %w", r.ID, err)
		}
		cancelled, err := request.CancelledEvent(r, previous, a.Subject)
		if err != nil {
			return err
		}
		changed, err := request.StatusChangedEvent(cancelled, r, previous)
		if err != nil {
			return err
		}
		return s.enqueue(ctx, tx, q, r.ID, cancelled, changed)
	})
	if err != nil {
		return request.Request{}, err
	}
	return r, nil
}

// ApplyWorkflowChange applies c inside the inbox transaction tx (already
// scoped to the event's tenant): a forward status move updates the row and
// enqueues request.status-changed.v1 derived from cause; an SLA breach is
// recorded once. Out-of-order or repeated moves are ignored. It returns
// request.ErrNotFound when the tenant has no such request.
func (s *Store) ApplyWorkflowChange(ctx context.Context, tx pgx.Tx, tenantID string, c request.WorkflowChange, cause envelope.Envelope) error {
	q := pgdb.New(tx)
	row, err := q.GetRequestForUpdate(ctx, pgdb.GetRequestForUpdateParams{TenantID: tenantID, ID: c.RequestID})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("request %s of %s: %w", c.RequestID, tenantID, request.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("lock request %s: %w", c.RequestID, err)
	}
	r := fromRow(row)
	if err := appendTimeline(ctx, tx, tenantID, r.ID, cause); err != nil {
		return err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	// The writes below are deferred (their results are not used): they
	// travel with the outbox rows and the timeline at COMMIT (pipetx), so
	// the whole reaction is the lock above and the commit.
	dq := pgdb.New(tenant.Deferring{Tx: tx})
	if c.SLABreached {
		if _, err := dq.MarkSLABreached(ctx, pgdb.MarkSLABreachedParams{TenantID: tenantID, ID: r.ID, BreachedAt: &now}); err != nil {
			return fmt.Errorf("mark request %s SLA breached: %w", r.ID, err)
		}
	}
	if c.Status == "" || !r.Status.CanMoveTo(c.Status) {
		return nil
	}
	previous := r.Status
	r.Status, r.StatusReason, r.UpdatedAt = c.Status, c.Reason, now
	var reason *string
	if c.Reason != "" {
		reason = &c.Reason
	}
	if err := dq.UpdateStatus(ctx, pgdb.UpdateStatusParams{TenantID: tenantID, ID: r.ID, Status: string(r.Status),
		StatusReason: reason, UpdatedAt: now}); err != nil {
		return fmt.Errorf("update request %s status: %w", r.ID, err)
	}
	env, err := request.StatusChangedEvent(cause, r, previous)
	if err != nil {
		return err
	}
	return s.enqueue(ctx, tx, q, r.ID, env)
}

// enqueue stores envs, events about request requestID, in the outbox and
// in the request's timeline, inside tx.
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, q *pgdb.Queries, requestID string, envs ...envelope.Envelope) error {
	items := make([]outbox.Item, len(envs))
	for i, env := range envs {
		items[i] = outbox.Item{Aggregate: aggregate(requestID), Envelope: env}
	}
	if err := s.outbox.Enqueue(ctx, tx, items...); err != nil {
		return fmt.Errorf("enqueue %s for %s: %w", envs[0].Type, requestID, err)
	}
	return appendTimeline(ctx, tx, envs[0].TenantID, requestID, envs...)
}

// appendTimeline records envs in request requestID's timeline; types the
// timeline does not show are skipped. The inserts are deferred: they
// travel with tx's next statement or its COMMIT (pipetx).
func appendTimeline(ctx context.Context, tx pgx.Tx, tenantID, requestID string, envs ...envelope.Envelope) error {
	q := pgdb.New(tenant.Deferring{Tx: tx})
	for _, env := range envs {
		e, ok, err := request.EntryOf(env)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		var st *string
		if e.Status != "" {
			v := string(e.Status)
			st = &v
		}
		if err := q.AppendTimeline(ctx, pgdb.AppendTimelineParams{TenantID: tenantID, EventID: e.EventID,
			RequestID: requestID, Type: e.Type, OccurredAt: e.OccurredAt, Status: st, Summary: e.Summary,
			CitizenVisible: e.CitizenVisible}); err != nil {
			return fmt.Errorf("timeline of request %s: %w", requestID, err)
		}
	}
	return nil
}

// Timeline returns the timeline of request id as a may see it (see
// request.ForActor), or request.ErrNotFound.
func (s *Store) Timeline(ctx context.Context, a request.Actor, id string) ([]request.Entry, error) {
	r, err := s.Get(ctx, a, id)
	if err != nil {
		return nil, err
	}
	var entries []request.Entry
	err = s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListTimeline(ctx, pgdb.ListTimelineParams{TenantID: a.TenantID, RequestID: r.ID})
		if err != nil {
			return fmt.Errorf("timeline of request %s: %w", r.ID, err)
		}
		for _, row := range rows {
			e := request.Entry{EventID: row.EventID, Type: row.Type, OccurredAt: row.OccurredAt,
				Summary: row.Summary, CitizenVisible: row.CitizenVisible}
			if row.Status != nil {
				e.Status = request.Status(*row.Status)
			}
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return request.ForActor(a, r, entries), nil
}

// StartWorkflow sends workflow.start.v1 for request id, which a (staff)
// may see, and returns the command's id. The workflow starts at most one
// process per request, so a repeated command changes nothing there.
func (s *Store) StartWorkflow(ctx context.Context, a request.Actor, id string) (string, error) {
	r, err := s.Get(ctx, a, id)
	if err != nil {
		return "", err
	}
	env, err := request.StartWorkflowCommand(r)
	if err != nil {
		return "", err
	}
	return env.ID, s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, _ *pgdb.Queries) error {
		if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: aggregate(r.ID), Envelope: env}); err != nil {
			return fmt.Errorf("enqueue %s for %s: %w", env.Type, r.ID, err)
		}
		return nil
	})
}

// ReprocessDocument sends document.process.v1 for document documentID of
// request requestID and returns the command's id, or request.ErrNotFound
// when a's tenant has no such document.
func (s *Store) ReprocessDocument(ctx context.Context, a request.Actor, requestID, documentID string) (string, error) {
	r, err := s.Get(ctx, a, requestID)
	if err != nil {
		return "", err
	}
	u, err := uuid.Parse(documentID)
	if err != nil {
		return "", request.ErrNotFound
	}
	var cmd string
	err = s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		row, err := q.GetDocument(ctx, pgdb.GetDocumentParams{TenantID: a.TenantID, RequestID: r.ID, ID: u.String()})
		if errors.Is(err, pgx.ErrNoRows) {
			return request.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("document %s: %w", u, err)
		}
		env, err := request.ProcessDocumentCommand(r, request.Document{ID: row.ID, RequestID: row.RequestID})
		if err != nil {
			return err
		}
		cmd = env.ID
		if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "document", ID: row.ID}, Envelope: env}); err != nil {
			return fmt.Errorf("enqueue %s for document %s: %w", env.Type, row.ID, err)
		}
		return nil
	})
	return cmd, err
}
