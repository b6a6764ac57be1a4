// Package replay sends a selection of a tenant's past events, read from the
// data lake's history, to one of a service's queues again (seed 004 §40-41),
// in one of three modes:
//
//   - DRY_RUN: nothing is sent; each event gets the decision a production
//     replay would take (deliver, or skip it because the consumer's inbox
//     has it, or refuse it).
//   - SIMULATION: each event runs through the queue's handler inside a
//     transaction that is always rolled back: what it would do (succeed or
//     fail, the events it would emit) is reported, and nothing is written.
//     Only handlers whose every effect is in that transaction may be
//     simulated (a handler that mails or writes object storage may not).
//   - PRODUCTION: each event is published again to the queue (through
//     platform.retry, to that queue alone) with confirms; the consumer's
//     inbox makes a second replay of the same events a no-op. It needs an
//     elevated role (auth.RoleReplayAdmin) on top of the operator's.
//
// A replay is a job: created with the events the history returned (fetched
// with the caller's token, at most MaxEvents), then worked through in
// batches by Sweep, each batch's outcomes committed with the job's
// progress, so a crash resumes where it stopped (a production batch
// published but not yet marked is published again, and the inbox skips
// it). Types the catalog marks replayable: false are refused. The job row
// is the audit record: who asked, why, what, and how it went.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/execution"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/internal/topic"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Mode is how a replay treats the events it selects.
type Mode string

// The three modes of seed 004 §41.
const (
	DryRun     Mode = "DRY_RUN"
	Simulation Mode = "SIMULATION"
	Production Mode = "PRODUCTION"
)

// Outcomes of a replayed event.
const (
	WouldDeliver      = "would-deliver"     // DRY_RUN: a production replay would send it
	WouldSkip         = "would-skip"        // DRY_RUN: sent, the inbox would skip it (already handled)
	Simulated         = "simulated"         // SIMULATION: the handler would succeed
	SimulatedFailure  = "simulated-failure" // SIMULATION: the handler would fail
	Delivered         = "delivered"         // PRODUCTION: sent and confirmed
	Refused           = "refused"           // not replayable, or not the job's tenant
	NotBound          = "not-bound"         // the queue does not receive the type
	Undecodable       = "undecodable"       // the history returned something that is not an envelope
	DefaultMaxEvents  = 50_000
	maxReasonLength   = 500
	maxSelectionTypes = 20
)

// errNotElevated refuses a PRODUCTION replay to an operator without
// auth.RoleReplayAdmin; Start reports it as a refused capability.
var errNotElevated = fmt.Errorf("%w: PRODUCTION needs the elevated role replay-admin as well as operator", ErrForbidden)

// Errors a caller can act on.
var (
	ErrInvalid       = errors.New("invalid replay")
	ErrNotFound      = errors.New("no such replay")
	ErrForbidden     = errors.New("replay not allowed")
	ErrTooMany       = errors.New("the selection holds too many events")
	ErrNoHistory     = errors.New("this service has no history to read (HISTORY_URL is not set)")
	ErrNotReplayable = errors.New("not replayable")
)

// Selection picks events from the tenant's history. A selection names at
// least one type or a correlation id: replaying "everything" is not a
// thing anyone should do by accident.
type Selection struct {
	Types         []string   `json:"types,omitempty"`
	CorrelationID string     `json:"correlationId,omitempty"`
	From          *time.Time `json:"from,omitempty"`
	To            *time.Time `json:"to,omitempty"`
}

// Request is what an operator asks for.
type Request struct {
	Queue     string    `json:"queue"`
	Mode      Mode      `json:"mode"`
	Selection Selection `json:"selection"`
	Reason    string    `json:"reason"`
}

// Job is a replay and its progress.
type Job struct {
	ID          string         `json:"id"`
	TenantID    string         `json:"tenantId"`
	Queue       string         `json:"queue"`
	Mode        Mode           `json:"mode"`
	Selection   Selection      `json:"selection"`
	Reason      string         `json:"reason"`
	RequestedBy string         `json:"requestedBy"`
	Status      string         `json:"status"` // running | done | cancelled
	Total       int            `json:"total"`
	Processed   int            `json:"processed"`
	Outcomes    map[string]int `json:"outcomes"`
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
}

// Item is one event of a job and what the job made of it.
type Item struct {
	Seq     int    `json:"seq"`
	EventID string `json:"eventId"`
	Type    string `json:"type"`
	Outcome string `json:"outcome,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// History returns a page of the tenant's stored events (the data lake's
// GET /v1/history), authorized by the caller's bearer token.
type History interface {
	Page(ctx context.Context, bearer string, sel Selection, after string, limit int) (events []json.RawMessage, next string, err error)
}

// Service runs the replays of one service's queues.
type Service struct {
	pool      *pgxpool.Pool
	schema    string
	consumers map[string]topology.Consumer
	reg       *registry.Registry
	pub       *broker.Publisher
	history   History
	handlers  map[string]fabric.TxHandler // the queues that may be simulated
	now       func() time.Time
	maxEvents int
	started   func()
}

// Options are a Service's dependencies beyond the obvious ones.
type Options struct {
	// Simulatable maps a queue to its handler when every effect of that
	// handler is in its transaction (rows, outbox): only those queues may
	// be replayed in SIMULATION.
	Simulatable map[string]fabric.TxHandler
	// MaxEvents caps a job's selection (default DefaultMaxEvents).
	MaxEvents int
	Now       func() time.Time
	// Started, when set, hears each job recorded: the sweep that runs
	// jobs waits longer while idle and wakes on it (sweep.RunIdle).
	Started func()
}

// New returns the replay service of the queues consumers, with jobs in
// schema.
func New(pool *pgxpool.Pool, schema string, consumers []topology.Consumer, reg *registry.Registry, pub *broker.Publisher,
	history History, opts Options) *Service {
	s := &Service{pool: pool, schema: schema, consumers: map[string]topology.Consumer{}, reg: reg, pub: pub, history: history,
		handlers: opts.Simulatable, now: opts.Now, maxEvents: opts.MaxEvents, started: opts.Started}
	for _, c := range consumers {
		s.consumers[c.Queue] = c
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxEvents <= 0 {
		s.maxEvents = DefaultMaxEvents
	}
	return s
}

// Queues are the queues replays may target.
func (s *Service) Queues() []string {
	out := make([]string, 0, len(s.consumers))
	for q := range s.consumers {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// Actor is who asks: the verified token's subject, tenant and roles.
type Actor struct {
	Subject     string
	TenantID    string
	Elevated    bool   // holds auth.RoleReplayAdmin
	BearerToken string // forwarded to the history
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// binds reports whether consumer c receives typ.
func binds(c topology.Consumer, typ string) bool {
	for _, b := range c.Bindings {
		if topic.Match(b.Key, typ) {
			return true
		}
	}
	return false
}

// check validates r for a, before anything is fetched.
func (s *Service) check(a Actor, r *Request) error {
	c, ok := s.consumers[r.Queue]
	if !ok {
		return fmt.Errorf("%w: queue %q is not one of this service's queues (%s)", ErrNotFound, r.Queue, strings.Join(s.Queues(), ", "))
	}
	r.Reason = strings.TrimSpace(r.Reason)
	switch {
	case a.TenantID == "":
		return fmt.Errorf("%w: the token names no tenant", ErrForbidden)
	case r.Reason == "" || len(r.Reason) > maxReasonLength:
		return invalid("reason: say why, in 1 to %d characters (it is the audit record)", maxReasonLength)
	case len(r.Selection.Types) == 0 && r.Selection.CorrelationID == "":
		return invalid("selection: name types or a correlationId (a replay never takes the whole history)")
	case len(r.Selection.Types) > maxSelectionTypes:
		return invalid("selection.types: at most %d", maxSelectionTypes)
	case r.Selection.From != nil && r.Selection.To != nil && !r.Selection.From.Before(*r.Selection.To):
		return invalid("selection: from must be before to")
	}
	if r.Selection.CorrelationID != "" {
		if _, err := uuid.Parse(r.Selection.CorrelationID); err != nil {
			return invalid("selection.correlationId: not a UUID")
		}
	}
	for _, t := range r.Selection.Types {
		d, ok := s.reg.Lookup(t)
		if !ok {
			return invalid("selection.types: %s is not in the catalog", t)
		}
		if !d.Replayable {
			return fmt.Errorf("%w: %s is marked replayable: false in the catalog", ErrNotReplayable, t)
		}
		if !binds(c, t) {
			return invalid("selection.types: queue %s does not receive %s", r.Queue, t)
		}
	}
	switch r.Mode {
	case DryRun:
	case Simulation:
		if s.handlers[r.Queue] == nil {
			return invalid("mode SIMULATION: queue %s's handler has effects outside its database transaction (mail, object storage, …), so it cannot run in a sandbox; use DRY_RUN", r.Queue)
		}
	case Production:
		if !a.Elevated {
			return errNotElevated
		}
	default:
		return invalid("mode %q: want DRY_RUN, SIMULATION or PRODUCTION", r.Mode)
	}
	return nil
}

// Start checks r, fetches its events from the history with a's token and
// records the job, which Sweep then works through. progress, if set, hears
// how many events have been fetched so far.
func (s *Service) Start(ctx context.Context, a Actor, r Request, progress func(fetched int)) (Job, error) {
	if err := s.check(a, &r); err != nil {
		if errors.Is(err, errNotElevated) {
			security.CapabilityRefused(ctx, "role:"+auth.RoleReplayAdmin)
		}
		return Job{}, err
	}
	if s.history == nil {
		return Job{}, ErrNoHistory
	}
	var bodies []json.RawMessage
	after := ""
	for {
		page, next, err := s.history.Page(ctx, a.BearerToken, r.Selection, after, 1000)
		if err != nil {
			return Job{}, fmt.Errorf("replay: read the history: %w", err)
		}
		bodies = append(bodies, page...)
		if len(bodies) > s.maxEvents {
			return Job{}, fmt.Errorf("%w: more than %d; narrow it (types, correlationId, from/to)", ErrTooMany, s.maxEvents)
		}
		if progress != nil {
			progress(len(bodies))
		}
		if next == "" || len(page) == 0 {
			break
		}
		after = next
	}
	sel, err := json.Marshal(r.Selection)
	if err != nil {
		return Job{}, err
	}
	now := s.now().UTC()
	job := Job{ID: uuid.Must(uuid.NewV7()).String(), TenantID: a.TenantID, Queue: r.Queue, Mode: r.Mode, Selection: r.Selection,
		Reason: r.Reason, RequestedBy: a.Subject, Status: "running", Total: len(bodies), Outcomes: map[string]int{},
		CreatedAt: now, UpdatedAt: now}
	if len(bodies) == 0 {
		job.Status = "done"
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tenant.Set(ctx, tx, job.TenantID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("replay_job")+` (id, tenant_id, queue, mode, selection, reason, requested_by,
			status, total, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
			job.ID, job.TenantID, job.Queue, string(job.Mode), sel, job.Reason, job.RequestedBy, job.Status, job.Total, now); err != nil {
			return err
		}
		ids, types, payloads := make([]string, len(bodies)), make([]string, len(bodies)), make([][]byte, len(bodies))
		for i, b := range bodies {
			// Only the id and type are read here, to list the item; the
			// body is decoded strictly when the job reaches it.
			var head struct{ ID, Type string }
			_ = json.Unmarshal(b, &head)
			if _, err := uuid.Parse(head.ID); err != nil {
				head.ID = uuid.Nil.String()
			}
			ids[i], types[i], payloads[i] = head.ID, head.Type, []byte(b)
		}
		// One INSERT of arrays, not COPY: PostgreSQL refuses COPY FROM
		// into a table under row-level security (fabric migration 00013).
		_, err := tx.Exec(ctx, `INSERT INTO `+s.table("replay_item")+` (job_id, seq, event_id, type, body)
			SELECT $1, seq, event_id, type, body
			FROM unnest($2::uuid[], $3::text[], $4::bytea[]) WITH ORDINALITY AS i(event_id, type, body, seq)`,
			job.ID, ids, types, payloads)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("replay: record the job: %w", err)
	}
	// Only a production replay sends anything: its whole selection is
	// what the operator's action touches, counted when ordered.
	if job.Mode == Production {
		security.MassAction(ctx, "history_replay", job.Total)
	}
	if s.started != nil && job.Status == "running" {
		s.started()
	}
	return job, nil
}

func (s *Service) table(name string) string { return pgx.Identifier{s.schema, name}.Sanitize() }

// Get returns the tenant's job id with its progress.
func (s *Service) Get(ctx context.Context, tenantID, id string) (Job, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Job{}, ErrNotFound
	}
	jobs, err := s.jobs(ctx, tenantID, `WHERE j.tenant_id = $1 AND j.id = $2`, tenantID, id)
	if err != nil {
		return Job{}, err
	}
	if len(jobs) == 0 {
		return Job{}, ErrNotFound
	}
	return jobs[0], nil
}

// List returns the tenant's latest jobs, newest first.
func (s *Service) List(ctx context.Context, tenantID string, limit int) ([]Job, error) {
	return s.jobs(ctx, tenantID, `WHERE j.tenant_id = $1 ORDER BY j.created_at DESC LIMIT `+fmt.Sprint(limit), tenantID)
}

// jobs reads the jobs where selects, in a transaction row-level security
// confines to tenantID.
func (s *Service) jobs(ctx context.Context, tenantID, where string, args ...any) (out []Job, err error) {
	err = tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		out, err = s.readJobs(ctx, tx, where, args...)
		return err
	})
	return out, err
}

func (s *Service) readJobs(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]Job, error) {
	rows, err := tx.Query(ctx, `SELECT j.id, j.tenant_id, j.queue, j.mode, j.selection, j.reason, j.requested_by, j.status, j.total,
		j.processed, j.created_at, j.updated_at,
		(SELECT coalesce(jsonb_object_agg(o.outcome, o.n), '{}') FROM (SELECT outcome, count(*) AS n FROM `+s.table("replay_item")+`
			WHERE job_id = j.id AND outcome IS NOT NULL GROUP BY outcome) o)
		FROM `+s.table("replay_job")+` j `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("replay: jobs: %w", err)
	}
	out := []Job{}
	for rows.Next() {
		var j Job
		var mode string
		var sel, outcomes []byte
		if err := rows.Scan(&j.ID, &j.TenantID, &j.Queue, &mode, &sel, &j.Reason, &j.RequestedBy, &j.Status, &j.Total, &j.Processed,
			&j.CreatedAt, &j.UpdatedAt, &outcomes); err != nil {
			rows.Close()
			return nil, fmt.Errorf("replay: jobs: %w", err)
		}
		j.Mode = Mode(mode)
		if err := json.Unmarshal(sel, &j.Selection); err != nil {
			rows.Close()
			return nil, fmt.Errorf("replay: job %s selection: %w", j.ID, err)
		}
		j.Outcomes = map[string]int{}
		if err := json.Unmarshal(outcomes, &j.Outcomes); err != nil {
			rows.Close()
			return nil, fmt.Errorf("replay: job %s outcomes: %w", j.ID, err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Items returns up to limit items of the tenant's job id after seq after:
// the decisions a DRY_RUN took, what a SIMULATION saw, what was delivered.
func (s *Service) Items(ctx context.Context, tenantID, id string, after, limit int) ([]Item, error) {
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return nil, err
	}
	var out []Item
	err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT seq, event_id, type, coalesce(outcome, ''), coalesce(detail, '') FROM `+s.table("replay_item")+`
			WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, id, after, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Item, error) {
			var it Item
			err := r.Scan(&it.Seq, &it.EventID, &it.Type, &it.Outcome, &it.Detail)
			return it, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replay: items of %s: %w", id, err)
	}
	return out, nil
}

// Cancel stops the tenant's running job id where it is.
func (s *Service) Cancel(ctx context.Context, tenantID, id string) (Job, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Job{}, ErrNotFound
	}
	err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+s.table("replay_job")+` SET status = 'cancelled', updated_at = $3
			WHERE tenant_id = $1 AND id = $2 AND status = 'running'`, tenantID, id, s.now().UTC())
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("replay: cancel %s: %w", id, err)
	}
	return s.Get(ctx, tenantID, id)
}

type pending struct {
	seq  int
	body []byte
}

// Sweep works through up to limit events of one running job (competing
// instances take different jobs) and returns how many it handled. The
// outcomes and the job's progress commit together.
func (s *Service) Sweep(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("replay sweep: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var job struct {
		id, tenantID, queue, mode, by string
	}
	// Any tenant's job may be next; its items are then read in its scope.
	if err := tenant.Platform(ctx, tx); err != nil {
		return 0, fmt.Errorf("replay sweep: %w", err)
	}
	err = tx.QueryRow(ctx, `SELECT id, tenant_id, queue, mode, requested_by FROM `+s.table("replay_job")+`
		WHERE status = 'running' ORDER BY created_at FOR UPDATE SKIP LOCKED LIMIT 1`).Scan(&job.id, &job.tenantID, &job.queue, &job.mode, &job.by)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("replay sweep: next job: %w", err)
	}
	if err := tenant.Set(ctx, tx, job.tenantID); err != nil {
		return 0, fmt.Errorf("replay sweep: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT seq, body FROM `+s.table("replay_item")+` WHERE job_id = $1 AND outcome IS NULL ORDER BY seq LIMIT $2`,
		job.id, limit)
	if err != nil {
		return 0, fmt.Errorf("replay %s: items: %w", job.id, err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pending, error) {
		var p pending
		err := r.Scan(&p.seq, &p.body)
		return p, err
	})
	if err != nil {
		return 0, fmt.Errorf("replay %s: items: %w", job.id, err)
	}
	c, ok := s.consumers[job.queue]
	for _, it := range items {
		outcome, detail := Refused, "queue "+job.queue+" is no longer this service's"
		if ok {
			outcome, detail, err = s.one(ctx, c, Mode(job.mode), job.tenantID, job.by, it.body)
			if err != nil {
				return 0, fmt.Errorf("replay %s: event %d: %w", job.id, it.seq, err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.table("replay_item")+` SET outcome = $3, detail = $4 WHERE job_id = $1 AND seq = $2`,
			job.id, it.seq, outcome, detail); err != nil {
			return 0, fmt.Errorf("replay %s: record event %d: %w", job.id, it.seq, err)
		}
	}
	status := "running"
	if len(items) < limit {
		status = "done"
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.table("replay_job")+` SET processed = processed + $2, status = $3, updated_at = $4 WHERE id = $1`,
		job.id, len(items), status, s.now().UTC()); err != nil {
		return 0, fmt.Errorf("replay %s: progress: %w", job.id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("replay %s: commit: %w", job.id, err)
	}
	return len(items), nil
}

// one replays body to consumer c in mode for tenantID and says what came
// of it. An error is a failure of the replay itself (the broker or the
// database), which leaves the batch to be tried again.
func (s *Service) one(ctx context.Context, c topology.Consumer, mode Mode, tenantID, by string, body []byte) (string, string, error) {
	env, err := envelope.Decode(body, 0)
	if err != nil {
		return Undecodable, err.Error(), nil
	}
	if env.TenantID != tenantID {
		return Refused, fmt.Sprintf("the event is tenant %s's, the replay tenant %s's", env.TenantID, tenantID), nil
	}
	d, known := s.reg.Lookup(env.Type)
	switch {
	case !known:
		return Refused, env.Type + " is not in the catalog", nil
	case !d.Replayable:
		return Refused, env.Type + " is marked replayable: false in the catalog", nil
	case !binds(c, env.Type):
		return NotBound, "queue " + c.Queue + " does not receive " + env.Type, nil
	}
	var handled bool
	err = tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table("inbox_message")+` WHERE consumer = $1 AND event_id = $2)`,
			c.Queue, env.ID).Scan(&handled)
	})
	if err != nil {
		return "", "", fmt.Errorf("inbox of %s: %w", c.Queue, err)
	}
	switch mode {
	case DryRun:
		if handled {
			return WouldSkip, "the consumer's inbox has it: a production replay would be skipped on arrival", nil
		}
		return WouldDeliver, "a production replay would deliver it to " + c.Queue, nil
	case Simulation:
		return s.simulate(ctx, s.handlers[c.Queue], env, handled)
	case Production:
		if err := s.send(ctx, c.Queue, by, env, body); err != nil {
			return "", "", err
		}
		if handled {
			return Delivered, "sent; the consumer's inbox has it, so it is skipped on arrival", nil
		}
		return Delivered, "sent to " + c.Queue, nil
	}
	return Refused, "unknown mode " + string(mode), nil
}

// simulate runs h on env in a transaction that is always rolled back, set
// up as the inbox would (the tenant), and reports what it would do.
func (s *Service) simulate(ctx context.Context, h fabric.TxHandler, env envelope.Envelope, handled bool) (string, string, error) {
	if h == nil {
		return Refused, "the queue's handler cannot be simulated", nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return "", "", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// As the consumer hands it over: the tenant in the context and in the
	// transaction, and the execution (the worker running replays carries
	// the service's release: host.Go).
	ctx = tenant.With(ctx, env.TenantID)
	run, _ := execution.From(ctx)
	run.Env = &env
	ctx = execution.With(ctx, run)
	if err := tenant.Set(ctx, tx, env.TenantID); err != nil {
		return "", "", err
	}
	note := ""
	if handled {
		note = " (the consumer's inbox has it: a production replay would be skipped on arrival)"
	}
	if herr := h(ctx, tx, env); herr != nil {
		return SimulatedFailure, fmt.Sprintf("would fail (%s): %v%s", fabric.ClassOf(herr), herr, note), nil
	}
	// The rows this transaction wrote to the outbox are the events the
	// handler would emit; they vanish with the rollback.
	rows, err := tx.Query(ctx, `SELECT event_type FROM `+s.table("outbox_event")+` WHERE xmin = pg_current_xact_id()::xid ORDER BY seq`)
	if err != nil {
		return "", "", fmt.Errorf("simulation: what it would emit: %w", err)
	}
	emitted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", "", fmt.Errorf("simulation: what it would emit: %w", err)
	}
	if len(emitted) == 0 {
		return Simulated, "would succeed, emitting nothing" + note, nil
	}
	return Simulated, "would succeed, emitting " + strings.Join(emitted, ", ") + note, nil
}

// send publishes body to queue alone (platform.retry, key = queue), with
// the headers the fabric's publisher gives an event and who replayed it,
// and waits for the broker's confirm.
func (s *Service) send(ctx context.Context, queue, by string, env envelope.Envelope, body []byte) error {
	h := amqp.Table{
		wire.HeaderTenant:     env.TenantID,
		wire.HeaderReplayedBy: by,
		wire.HeaderReplayedAt: s.now().UTC().Format(time.RFC3339),
	}
	pd, err := s.pub.Send(ctx, broker.Message{Exchange: topology.RetryExchange, RoutingKey: queue, Body: body, MessageID: env.ID,
		CorrelationID: env.CorrelationID, Type: env.Type, Timestamp: env.OccurredAt, Headers: h})
	if err != nil {
		return fmt.Errorf("publish %s: %w", env.ID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pd.Wait(wctx); err != nil {
		return fmt.Errorf("confirm of %s: %w", env.ID, err)
	}
	return nil
}
