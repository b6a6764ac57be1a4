// Package postgres stores process instances, tasks and SLA timers in the
// workflow schema and enqueues their events in the same transactions.
// Transactions set app.tenant_id for row-level security and queries also
// filter by tenant (superusers bypass RLS).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// Enqueuer stores envelopes in the caller's transaction (outbox.Outbox).
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Store is the workflow service's Postgres adapter.
type Store struct {
	pool    *pgxpool.Pool
	outbox  Enqueuer
	catalog *process.Catalog
	now     func() time.Time
	dueSoon time.Duration
	// defaultStuckAfter is the watchdog threshold of definitions that set
	// none.
	defaultStuckAfter time.Duration
}

// New returns a Store on pool (search_path = the service schema).
// dueSoon is the worklist's due-soon window (process.SLADueSoon);
// stuckAfter the watchdog's threshold for definitions without their own.
func New(pool *pgxpool.Pool, ob Enqueuer, catalog *process.Catalog, now func() time.Time, dueSoon, stuckAfter time.Duration) *Store {
	return &Store{pool: pool, outbox: ob, catalog: catalog, now: now, dueSoon: dueSoon, defaultStuckAfter: stuckAfter}
}

func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// inTenant runs fn in a transaction scoped to tenantID by row-level
// security.
func (s *Store) inTenant(ctx context.Context, tenantID string, fn func(tx pgx.Tx, q *pgdb.Queries) error) error {
	return tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error { return fn(tx, pgdb.New(tx)) })
}

func newID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new id: %w", err)
	}
	return id.String(), nil
}

// canonicalID returns id in PostgreSQL's spelling: uuid.Parse also takes
// spellings PostgreSQL refuses ("urn:uuid:…"). Not a UUID: no such row.
func canonicalID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

func aggregate(processID string) outbox.Aggregate {
	return outbox.Aggregate{Type: "process", ID: processID}
}

// openTask inserts the task of step for p with its SLA timer and its
// watchdog timer (def's stuckAfter, else the store's default).
func (s *Store) openTask(ctx context.Context, q *pgdb.Queries, p process.Instance, def process.Definition, index int, now time.Time) (string, error) {
	step := def.Steps[index]
	id, err := newID()
	if err != nil {
		return "", err
	}
	due := now.Add(step.SLA)
	if err := q.InsertTask(ctx, pgdb.InsertTaskParams{ID: id, TenantID: p.TenantID, ProcessID: p.ID, StepIndex: int32(index),
		Step: step.Name, AssigneeRole: step.AssigneeRole, DueAt: due, CreatedAt: now}); err != nil {
		return "", fmt.Errorf("insert task %s of process %s: %w", step.Name, p.ID, err)
	}
	if err := q.InsertTimer(ctx, pgdb.InsertTimerParams{TaskID: id, TenantID: p.TenantID, DueAt: due}); err != nil {
		return "", fmt.Errorf("insert SLA timer of task %s: %w", id, err)
	}
	if err := q.InsertStuckTimer(ctx, pgdb.InsertStuckTimerParams{TaskID: id, TenantID: p.TenantID, ProcessID: p.ID,
		DueAt: now.Add(s.stuckAfter(def))}); err != nil {
		return "", fmt.Errorf("insert watchdog timer of task %s: %w", id, err)
	}
	return id, nil
}

// stuckAfter is def's watchdog threshold.
func (s *Store) stuckAfter(def process.Definition) time.Duration {
	if def.StuckAfter > 0 {
		return def.StuckAfter
	}
	return s.defaultStuckAfter
}

// dropTimers removes a task's SLA and watchdog timers: it no longer waits.
func dropTimers(ctx context.Context, q *pgdb.Queries, taskID string) error {
	if err := q.DeleteTimer(ctx, taskID); err != nil {
		return fmt.Errorf("drop the SLA timer of task %s: %w", taskID, err)
	}
	if err := q.DeleteStuckTimer(ctx, taskID); err != nil {
		return fmt.Errorf("drop the watchdog timer of task %s: %w", taskID, err)
	}
	return nil
}

// StartProcess creates the process for a submitted request inside the
// inbox transaction tx (scoped to tenant): instance, first task, SLA timer,
// and workflow.process-started.v1 derived from cause. A second start for
// the same request does nothing.
func (s *Store) StartProcess(ctx context.Context, tx pgx.Tx, tenantID string, sub process.Submitted, cause envelope.Envelope) error {
	q := pgdb.New(tx)
	def := s.catalog.For(sub.ServiceID)
	id, err := newID()
	if err != nil {
		return err
	}
	now := s.clock()
	p := process.Instance{ID: id, TenantID: tenantID, RequestID: sub.RequestID, ServiceID: sub.ServiceID,
		DefinitionID: def.ID, CitizenID: sub.CitizenID, CorrelationID: cause.CorrelationID}
	inserted, err := q.InsertProcess(ctx, pgdb.InsertProcessParams{ID: p.ID, TenantID: tenantID, RequestID: p.RequestID,
		CitizenID: p.CitizenID, ServiceID: p.ServiceID, DefinitionID: p.DefinitionID, CorrelationID: p.CorrelationID, StartedAt: now})
	if err != nil {
		return fmt.Errorf("insert process for request %s: %w", sub.RequestID, err)
	}
	if inserted == 0 {
		return nil
	}
	// The task and its timers are deferred writes: they travel with the
	// transaction's next statement or its COMMIT (pipetx).
	taskID, err := s.openTask(ctx, pgdb.New(tenant.Deferring{Tx: tx}), p, def, 0, now)
	if err != nil {
		return err
	}
	env, err := envelope.Derive(cause, process.TypeProcessStarted, process.Producer, payload.ProcessStarted{
		ProcessID: p.ID, RequestID: p.RequestID, DefinitionID: def.ID, FirstTaskID: taskID})
	if err != nil {
		return err
	}
	env = process.WithWorkflow(env, p.ID, "")
	// A first step waiting for an event that came before the process
	// started is resumed at once.
	resumed, err := s.resumeEarly(ctx, q, p, def, 0, taskID)
	if err != nil {
		return err
	}
	items := append([]outbox.Item{{Aggregate: aggregate(p.ID), Envelope: env}}, resumed...)
	if err := s.outbox.Enqueue(ctx, tx, items...); err != nil {
		return fmt.Errorf("enqueue %s for process %s: %w", env.Type, p.ID, err)
	}
	return nil
}

// CancelProcess stops the process of a request its citizen cancelled,
// inside the inbox transaction tx: a running process and its open tasks
// become cancelled and their SLA timers go. A cancellation that arrives
// before the submission records a cancelled process with no task, so the
// late start finds the request taken (StartProcess does nothing). A
// completed process, or one already cancelled, is left as it is. It emits
// no event: the request service already moved the request to cancelled.
func (s *Store) CancelProcess(ctx context.Context, tx pgx.Tx, tenantID string, c process.Cancelled, cause envelope.Envelope) error {
	q := pgdb.New(tx)
	id, err := newID()
	if err != nil {
		return err
	}
	now := s.clock()
	row, err := q.CancelProcess(ctx, pgdb.CancelProcessParams{ID: id, TenantID: tenantID, RequestID: c.RequestID,
		CitizenID: c.CitizenID, CorrelationID: cause.CorrelationID, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cancel the process of request %s: %w", c.RequestID, err)
	}
	tasks, err := q.CancelOpenTasks(ctx, pgdb.CancelOpenTasksParams{Now: &now, TenantID: tenantID, ProcessID: row.ID})
	if err != nil {
		return fmt.Errorf("cancel the tasks of process %s: %w", row.ID, err)
	}
	for _, t := range tasks {
		if err := dropTimers(ctx, q, t); err != nil {
			return err
		}
	}
	return nil
}

// CompleteTask completes task id for a with decision d, enqueues
// workflow.task-completed.v1, and either opens the next step's task or
// completes the process (workflow.process-completed.v1), all in one
// transaction. A process completed as approved also gets its SEI
// registration: a pending sei_registration row and the
// integration.sei.register.v1 command, in the same transaction. It returns
// process.ErrNotFound (no such task in a's tenant), process.ErrForbidden (a
// lacks the assignee role), process.ErrTaskClosed, a *process.ClaimedError
// (the task is claimed by someone else: operators release it first),
// process.ErrInvalidOutcome or process.ErrInvalidReason.
func (s *Store) CompleteTask(ctx context.Context, a process.Actor, id string, d process.Decision) (process.Instance, error) {
	d, err := d.Check()
	if err != nil {
		return process.Instance{}, err
	}
	outcome := d.Outcome
	id, ok := canonicalID(id)
	if !ok {
		return process.Instance{}, process.ErrNotFound
	}
	var processID string
	err = s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		t, err := q.GetTaskForUpdate(ctx, pgdb.GetTaskForUpdateParams{TenantID: a.TenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			return process.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("lock task %s: %w", id, err)
		}
		if !a.MayComplete(t.AssigneeRole) {
			return process.ErrForbidden
		}
		if t.Status != "open" {
			return process.ErrTaskClosed
		}
		// A claimed task is its assignee's to complete (the row is locked,
		// so a claim cannot slip in between); an unclaimed one anyone's
		// who holds its role.
		if t.Assignee != nil && *t.Assignee != a.Subject {
			return &process.ClaimedError{Assignee: *t.Assignee}
		}
		row, err := q.GetProcessForUpdate(ctx, pgdb.GetProcessForUpdateParams{TenantID: a.TenantID, ID: t.ProcessID})
		if err != nil {
			return fmt.Errorf("lock process %s: %w", t.ProcessID, err)
		}
		p := fromProcessRow(row)
		processID = p.ID
		def, ok := s.catalog.ByID(p.DefinitionID)
		if !ok {
			return fmt.Errorf("process %s: definition %s is no longer deployed", p.ID, p.DefinitionID)
		}
		items, err := s.finish(ctx, q, p, def, t, outcome, d.Reason, a.Subject, nil)
		if err != nil {
			return err
		}
		if err := s.outbox.Enqueue(ctx, tx, items...); err != nil {
			return fmt.Errorf("enqueue events of task %s: %w", t.ID, err)
		}
		return nil
	})
	if err != nil {
		return process.Instance{}, err
	}
	return s.instance(ctx, a.TenantID, processID)
}

// registerInSEI records p's SEI registration as pending and returns the
// integration.sei.register.v1 command for it, for the transaction that
// approves p: an approval is never without its registration, and the
// command is only sent if the approval commits.
func (s *Store) registerInSEI(ctx context.Context, q *pgdb.Queries, p process.Instance, def process.Definition, now time.Time) (outbox.Item, error) {
	if err := q.InsertSEIPending(ctx, pgdb.InsertSEIPendingParams{TenantID: p.TenantID, RequestID: p.RequestID,
		Unit: optional(def.SEIUnit), Now: now}); err != nil {
		return outbox.Item{}, fmt.Errorf("record the SEI registration of request %s: %w", p.RequestID, err)
	}
	env, err := process.Event(p, process.TypeSEIRegister, process.SEIRegister{RequestID: p.RequestID, Unit: def.SEIUnit})
	if err != nil {
		return outbox.Item{}, err
	}
	return outbox.Item{Aggregate: aggregate(p.ID), Envelope: env}, nil
}

func (s *Store) instance(ctx context.Context, tenantID, id string) (process.Instance, error) {
	var out process.Instance
	err := s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		row, err := q.GetProcess(ctx, pgdb.GetProcessParams{TenantID: tenantID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			return process.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("get process %s: %w", id, err)
		}
		list, err := withTasks(ctx, q, tenantID, []pgdb.ProcessInstance{row})
		if err != nil {
			return err
		}
		out = list[0]
		return nil
	})
	return out, err
}

// Processes returns the processes of requestID that a may see (staff: the
// tenant's; a citizen: their own), with their tasks.
func (s *Store) Processes(ctx context.Context, a process.Actor, requestID string) ([]process.Instance, error) {
	out := []process.Instance{}
	err := s.inTenant(ctx, a.TenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListProcessesByRequest(ctx, pgdb.ListProcessesByRequestParams{TenantID: a.TenantID, RequestID: requestID})
		if err != nil {
			return fmt.Errorf("list processes of request %s: %w", requestID, err)
		}
		visible := rows[:0]
		for _, r := range rows {
			if a.Staff() || r.CitizenID == a.Subject {
				visible = append(visible, r)
			}
		}
		if len(visible) == 0 {
			return nil
		}
		out, err = withTasks(ctx, q, a.TenantID, visible)
		if err != nil {
			return err
		}
		if !a.Staff() {
			// SEI's error texts are for staff, not the citizen.
			for _, p := range out {
				if p.SEI != nil {
					p.SEI.LastError = ""
				}
			}
		}
		return nil
	})
	return out, err
}

func withTasks(ctx context.Context, q *pgdb.Queries, tenantID string, rows []pgdb.ProcessInstance) ([]process.Instance, error) {
	ids := make([]string, len(rows))
	out := make([]process.Instance, len(rows))
	index := map[string]int{}
	for i, r := range rows {
		ids[i], out[i], index[r.ID] = r.ID, fromProcessRow(r), i
		out[i].Tasks = []process.Task{}
	}
	tasks, err := q.ListTasks(ctx, pgdb.ListTasksParams{TenantID: tenantID, ProcessIds: ids})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	for _, t := range tasks {
		i := index[t.ProcessID]
		out[i].Tasks = append(out[i].Tasks, fromTaskRow(t))
	}
	requests := make([]string, len(rows))
	for i, r := range rows {
		requests[i] = r.RequestID
	}
	regs, err := q.ListSEIRegistrations(ctx, pgdb.ListSEIRegistrationsParams{TenantID: tenantID, RequestIds: requests})
	if err != nil {
		return nil, fmt.Errorf("list SEI registrations: %w", err)
	}
	byRequest := map[string]pgdb.SeiRegistration{}
	for _, r := range regs {
		byRequest[r.RequestID] = r
	}
	for i := range out {
		if r, ok := byRequest[out[i].RequestID]; ok {
			reg := fromSEIRow(r)
			out[i].SEI = &reg
		}
	}
	return out, nil
}

func fromProcessRow(r pgdb.ProcessInstance) process.Instance {
	p := process.Instance{ID: r.ID, TenantID: r.TenantID, RequestID: r.RequestID, CitizenID: r.CitizenID,
		ServiceID: r.ServiceID, DefinitionID: r.DefinitionID, Status: r.Status, CurrentStep: int(r.CurrentStep),
		CorrelationID: r.CorrelationID, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt}
	if r.Outcome != nil {
		p.Outcome = *r.Outcome
	}
	return p
}

func fromTaskRow(r pgdb.Task) process.Task {
	t := process.Task{ID: r.ID, ProcessID: r.ProcessID, StepIndex: int(r.StepIndex), Step: r.Step,
		AssigneeRole: r.AssigneeRole, Status: r.Status, DueAt: r.DueAt, SLABreached: r.BreachedAt != nil,
		BreachedAt: r.BreachedAt, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt}
	if r.Outcome != nil {
		t.Outcome = *r.Outcome
	}
	if r.CompletedBy != nil {
		t.CompletedBy = *r.CompletedBy
	}
	if r.Reason != nil {
		t.Reason = *r.Reason
	}
	if r.Assignee != nil {
		t.Assignee, t.ClaimedAt = *r.Assignee, r.ClaimedAt
	}
	return t
}

// SweepStuck reports up to limit tasks whose watchdog timer is due: for
// each still open, workflow.stuck.v1 is enqueued in the transaction that
// deletes its timer, so the report goes out once however many instances
// sweep (SKIP LOCKED). A task completed meanwhile had its timer dropped;
// one of a process that ended otherwise is skipped. It returns how many
// it reported.
func (s *Store) SweepStuck(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("watchdog sweep: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := pgdb.New(tx)
	// Due timers of every tenant (row-level security admits them in
	// platform scope); each task is then handled in its tenant's scope.
	if err := tenant.Platform(ctx, tx); err != nil {
		return 0, fmt.Errorf("watchdog sweep: %w", err)
	}
	timers, err := q.DueStuckTimers(ctx, pgdb.DueStuckTimersParams{Now: s.clock(), MaxTimers: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("watchdog sweep: due timers: %w", err)
	}
	reported := 0
	for _, tm := range timers {
		if err := tenant.Set(ctx, tx, tm.TenantID); err != nil {
			return 0, err
		}
		if err := q.DeleteStuckTimer(ctx, tm.TaskID); err != nil {
			return 0, fmt.Errorf("watchdog sweep: delete timer %s: %w", tm.TaskID, err)
		}
		t, err := q.GetTask(ctx, pgdb.GetTaskParams{TenantID: tm.TenantID, ID: tm.TaskID})
		if err != nil {
			return 0, fmt.Errorf("watchdog sweep: task %s: %w", tm.TaskID, err)
		}
		row, err := q.GetProcess(ctx, pgdb.GetProcessParams{TenantID: tm.TenantID, ID: tm.ProcessID})
		if err != nil {
			return 0, fmt.Errorf("watchdog sweep: process %s: %w", tm.ProcessID, err)
		}
		p := fromProcessRow(row)
		if t.Status != "open" || p.Status != "running" {
			continue
		}
		def, _ := s.catalog.ByID(p.DefinitionID)
		env, err := process.Event(p, process.TypeStuck, payload.Stuck{ProcessID: p.ID, RequestID: p.RequestID,
			DefinitionID: p.DefinitionID, TaskID: t.ID, Step: t.Step, WaitingSince: t.CreatedAt,
			StuckAfterSeconds: max(int64(s.stuckAfter(def)/time.Second), 1)})
		if err != nil {
			return 0, err
		}
		env = process.WithWorkflow(env, p.ID, t.Step)
		if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: aggregate(p.ID), Envelope: env}); err != nil {
			return 0, fmt.Errorf("watchdog sweep: enqueue stuck process %s: %w", p.ID, err)
		}
		reported++
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("watchdog sweep: commit: %w", err)
	}
	return reported, nil
}

// SweepSLA marks up to limit overdue open tasks as breached, once each,
// and enqueues task.sla-breached.v1 for them, in one transaction. Due
// timers are locked with SKIP LOCKED, so concurrent sweepers (several
// instances) never report the same task twice. It returns how many tasks
// it marked.
func (s *Store) SweepSLA(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("sla sweep: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := pgdb.New(tx)
	now := s.clock()
	if err := tenant.Platform(ctx, tx); err != nil { // due timers of every tenant
		return 0, fmt.Errorf("sla sweep: %w", err)
	}
	timers, err := q.DueTimers(ctx, pgdb.DueTimersParams{Now: now, MaxTimers: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("sla sweep: due timers: %w", err)
	}
	marked := 0
	for _, tm := range timers {
		// Each task is read and changed under its own tenant's RLS scope.
		if err := tenant.Set(ctx, tx, tm.TenantID); err != nil {
			return 0, err
		}
		if err := q.DeleteTimer(ctx, tm.TaskID); err != nil {
			return 0, fmt.Errorf("sla sweep: delete timer %s: %w", tm.TaskID, err)
		}
		t, err := q.MarkBreached(ctx, pgdb.MarkBreachedParams{TenantID: tm.TenantID, ID: tm.TaskID, BreachedAt: &now})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // completed meanwhile: its timer was stale
		}
		if err != nil {
			return 0, fmt.Errorf("sla sweep: mark task %s: %w", tm.TaskID, err)
		}
		row, err := q.GetProcess(ctx, pgdb.GetProcessParams{TenantID: tm.TenantID, ID: t.ProcessID})
		if err != nil {
			return 0, fmt.Errorf("sla sweep: process %s: %w", t.ProcessID, err)
		}
		p := fromProcessRow(row)
		env, err := process.Event(p, process.TypeSLABreached, payload.SLABreached{TaskID: t.ID, ProcessID: p.ID,
			RequestID: p.RequestID, Step: t.Step, AssigneeRole: t.AssigneeRole, DueAt: t.DueAt})
		if err != nil {
			return 0, err
		}
		env = process.WithWorkflow(env, p.ID, t.Step)
		if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: aggregate(p.ID), Envelope: env}); err != nil {
			return 0, fmt.Errorf("sla sweep: enqueue breach of task %s: %w", t.ID, err)
		}
		marked++
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("sla sweep: commit: %w", err)
	}
	return marked, nil
}
