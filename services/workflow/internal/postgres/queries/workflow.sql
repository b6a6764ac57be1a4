-- name: InsertProcess :execrows
INSERT INTO process_instance (id, tenant_id, request_id, citizen_id, service_id, definition_id,
                              correlation_id, started_at)
VALUES (@id, @tenant_id, @request_id, @citizen_id, @service_id, @definition_id, @correlation_id, @started_at)
ON CONFLICT (tenant_id, request_id) WHERE subscription_id IS NULL DO NOTHING;

-- name: InsertReactionProcess :execrows
-- A process a start-workflow reaction opens: once per triggering event and
-- subscription (process_instance_reaction), however often the event comes.
INSERT INTO process_instance (id, tenant_id, request_id, citizen_id, service_id, definition_id,
                              correlation_id, started_at, subscription_id, trigger_event_id, entity_type, entity_id)
VALUES (@id, @tenant_id, @request_id, @citizen_id, @service_id, @definition_id, @correlation_id, @started_at,
        @subscription_id, @trigger_event_id, @entity_type, @entity_id)
ON CONFLICT (tenant_id, trigger_event_id, subscription_id) WHERE subscription_id IS NOT NULL DO NOTHING;

-- name: RequestProcess :one
-- The request's own process (its submission's), for what a reaction's
-- process of the same request inherits: citizen and service.
SELECT citizen_id, service_id FROM process_instance
WHERE tenant_id = @tenant_id AND request_id = @request_id AND subscription_id IS NULL;

-- name: RunningStartedBy :one
-- The blast radius of a start-workflow reaction: the processes its
-- subscription started that still run.
SELECT count(*)::int FROM process_instance WHERE tenant_id = @tenant_id AND subscription_id = @subscription_id AND status = 'running';

-- name: InsertTask :exec
INSERT INTO task (id, tenant_id, process_id, step_index, step, assignee_role, due_at, created_at)
VALUES (@id, @tenant_id, @process_id, @step_index, @step, @assignee_role, @due_at, @created_at);

-- name: InsertTimer :exec
INSERT INTO sla_timer (task_id, tenant_id, due_at) VALUES (@task_id, @tenant_id, @due_at);

-- name: DeleteTimer :exec
DELETE FROM sla_timer WHERE task_id = @task_id;

-- name: GetTaskForUpdate :one
SELECT * FROM task WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: GetProcessForUpdate :one
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: GetProcess :one
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND id = @id;

-- name: CompleteTask :exec
UPDATE task SET status = 'completed', outcome = @outcome, reason = @reason, completed_at = @completed_at,
                completed_by = @completed_by
WHERE tenant_id = @tenant_id AND id = @id;

-- name: AdvanceProcess :exec
UPDATE process_instance SET current_step = @current_step WHERE tenant_id = @tenant_id AND id = @id;

-- name: CompleteProcess :exec
UPDATE process_instance SET status = 'completed', outcome = @outcome, completed_at = @completed_at
WHERE tenant_id = @tenant_id AND id = @id;

-- name: DueTimers :many
-- Several instances sweep at once: each locks the timers it takes and
-- skips the others', so a breach is reported once.
SELECT task_id, tenant_id, due_at FROM sla_timer
WHERE due_at <= @now
ORDER BY due_at
LIMIT @max_timers
FOR UPDATE SKIP LOCKED;

-- name: MarkBreached :one
UPDATE task SET breached_at = @breached_at
WHERE tenant_id = @tenant_id AND id = @id AND status = 'open' AND breached_at IS NULL
RETURNING *;

-- name: ListProcessesByRequest :many
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND request_id = @request_id ORDER BY started_at;

-- name: ListTasks :many
SELECT * FROM task WHERE tenant_id = @tenant_id AND process_id = ANY(@process_ids::uuid[]) ORDER BY process_id, step_index;

-- name: GetTask :one
SELECT * FROM task WHERE tenant_id = @tenant_id AND id = @id;

-- name: ClaimTask :one
-- The claim is decided here, by the row: only an open, unclaimed task of a
-- role the caller holds (roles NULL: an operator, any role) is taken. Of
-- two claims at once, the second waits for the first's row lock, then
-- re-checks assignee IS NULL on the row the first committed and updates
-- nothing.
UPDATE task SET assignee = @assignee::text, claimed_at = @claimed_at::timestamptz
WHERE tenant_id = @tenant_id AND id = @id AND status = 'open' AND assignee IS NULL
  AND (sqlc.narg(roles)::text[] IS NULL OR assignee_role = ANY (sqlc.narg(roles)::text[]))
RETURNING *;

-- name: ReleaseTask :one
-- Clears the claim of an open task held by subject (any_assignee: an
-- operator, whoever holds it).
UPDATE task SET assignee = NULL, claimed_at = NULL
WHERE tenant_id = @tenant_id AND id = @id AND status = 'open' AND assignee IS NOT NULL
  AND (assignee = @subject::text OR @any_assignee::boolean)
RETURNING *;

-- name: ListWorklist :many
-- The worklist: a tenant's tasks by due date (ties by id), one page after
-- a keyset position (due_at, id). roles NULL: every assignee role (an
-- operator); otherwise only tasks assigned to one of them. The SLA state is
-- 'breached' once the SLA watcher marked the task (breached_at), else
-- 'due_soon' for an open task due by @soon (overdue and not yet swept
-- included), else 'on_time'. The tenant filter is on top of row-level
-- security.
SELECT t.*, p.request_id, p.service_id,
       (CASE WHEN t.breached_at IS NOT NULL THEN 'breached'
             WHEN t.status = 'open' AND t.due_at <= @soon::timestamptz THEN 'due_soon'
             ELSE 'on_time' END)::text AS sla_state
FROM task t
JOIN process_instance p ON p.tenant_id = t.tenant_id AND p.id = t.process_id
WHERE t.tenant_id = @tenant_id
  AND (sqlc.narg(roles)::text[] IS NULL OR t.assignee_role = ANY (sqlc.narg(roles)::text[]))
  AND (sqlc.narg(role)::text IS NULL OR t.assignee_role = sqlc.narg(role)::text)
  AND (sqlc.narg(status)::text IS NULL OR t.status = sqlc.narg(status)::text)
  AND (sqlc.narg(assignee)::text IS NULL OR t.assignee = sqlc.narg(assignee)::text)
  AND (sqlc.narg(sla)::text IS NULL OR sqlc.narg(sla)::text =
       CASE WHEN t.breached_at IS NOT NULL THEN 'breached'
            WHEN t.status = 'open' AND t.due_at <= @soon::timestamptz THEN 'due_soon'
            ELSE 'on_time' END)
  AND (sqlc.narg(after_due)::timestamptz IS NULL
       OR (t.due_at, t.id) > (sqlc.narg(after_due)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY t.due_at, t.id
LIMIT @max_rows;

-- name: CancelProcess :one
-- The request's process becomes cancelled: a running one stops, and when
-- none exists yet a cancelled one with no task takes the request, so a
-- later start does nothing. A completed or cancelled process stays as it
-- is: then no row comes back.
INSERT INTO process_instance (id, tenant_id, request_id, citizen_id, service_id, definition_id,
                              status, correlation_id, started_at, completed_at)
VALUES (@id, @tenant_id, @request_id, @citizen_id, '', '', 'cancelled', @correlation_id, @now, @now)
ON CONFLICT (tenant_id, request_id) WHERE subscription_id IS NULL DO UPDATE SET status = 'cancelled', completed_at = @now
    WHERE process_instance.status = 'running'
RETURNING id, status;

-- name: CancelOpenTasks :many
UPDATE task SET status = 'cancelled', completed_at = @now
WHERE tenant_id = @tenant_id AND process_id = @process_id AND status = 'open'
RETURNING id;

-- name: InsertSEIPending :exec
-- The approval's registration is pending until the consumer records SEI's
-- answer. A row already there (a second approval cannot happen, but a
-- command re-sent by hand can) is left as it is.
INSERT INTO sei_registration (tenant_id, request_id, unit, created_at, updated_at)
VALUES (@tenant_id, @request_id, sqlc.narg(unit), @now, @now)
ON CONFLICT (tenant_id, request_id) DO NOTHING;

-- name: GetSEIRegistration :one
SELECT * FROM sei_registration WHERE tenant_id = @tenant_id AND request_id = @request_id;

-- name: GetSEIRegistrationForUpdate :one
-- Where the registration stood before this attempt is recorded: two copies
-- of a command recording at once take turns, so only one sees the change.
SELECT * FROM sei_registration WHERE tenant_id = @tenant_id AND request_id = @request_id FOR UPDATE;

-- name: RecordSEIAttempt :one
-- One call to SEI and its result: registered (with the number), rejected,
-- or still pending after a failure worth retrying. A registration never
-- goes back: once registered, a late or concurrent attempt only counts.
-- The row is created if the approval did not write it (a command sent by
-- hand).
INSERT INTO sei_registration AS r (tenant_id, request_id, status, unit, sei_number, attempts, last_error,
                                   created_at, updated_at, registered_at)
VALUES (@tenant_id, @request_id, @status::text, sqlc.narg(unit), sqlc.narg(sei_number), 1, sqlc.narg(last_error),
        @now, @now, CASE WHEN @status::text = 'registered' THEN @now::timestamptz END)
ON CONFLICT (tenant_id, request_id) DO UPDATE SET
    attempts      = r.attempts + 1,
    updated_at    = EXCLUDED.updated_at,
    unit          = COALESCE(EXCLUDED.unit, r.unit),
    status        = CASE WHEN r.status = 'registered' THEN r.status ELSE EXCLUDED.status END,
    sei_number    = CASE WHEN r.status = 'registered' THEN r.sei_number ELSE EXCLUDED.sei_number END,
    registered_at = CASE WHEN r.status = 'registered' THEN r.registered_at ELSE EXCLUDED.registered_at END,
    last_error    = CASE WHEN r.status = 'registered' THEN r.last_error ELSE EXCLUDED.last_error END
RETURNING *;

-- name: ListSEIRegistrations :many
SELECT * FROM sei_registration WHERE tenant_id = @tenant_id AND request_id = ANY(@request_ids::uuid[]);

-- name: InsertStuckTimer :exec
INSERT INTO stuck_timer (task_id, tenant_id, process_id, due_at) VALUES (@task_id, @tenant_id, @process_id, @due_at);

-- name: DeleteStuckTimer :exec
DELETE FROM stuck_timer WHERE task_id = @task_id;

-- name: DueStuckTimers :many
-- As DueTimers: competing watchdogs skip each other's timers, so a task is
-- reported stuck once.
SELECT task_id, tenant_id, process_id, due_at FROM stuck_timer
WHERE due_at <= @now
ORDER BY due_at
LIMIT @max_timers
FOR UPDATE SKIP LOCKED;

-- name: InsertSchedule :one
INSERT INTO schedule (id, tenant_id, name, cron, time_zone, catch_up, max_catch_up, payload, query, created_by, created_at)
VALUES (@id, @tenant_id, @name, @cron, @time_zone, @catch_up, @max_catch_up, @payload, @query, @created_by, @created_at)
ON CONFLICT (tenant_id, name) DO NOTHING
RETURNING *;

-- name: InsertScheduleTimer :exec
INSERT INTO schedule_timer (schedule_id, tenant_id, due_at) VALUES (@schedule_id, @tenant_id, @due_at);

-- name: ListSchedules :many
SELECT * FROM schedule WHERE tenant_id = @tenant_id ORDER BY name;

-- name: GetSchedule :one
SELECT * FROM schedule WHERE tenant_id = @tenant_id AND id = @id;

-- name: DisableSchedule :one
UPDATE schedule SET enabled = false, disabled_at = @now
WHERE tenant_id = @tenant_id AND id = @id AND enabled
RETURNING *;

-- name: DeleteScheduleTimer :exec
DELETE FROM schedule_timer WHERE schedule_id = @schedule_id;

-- name: DueScheduleTimers :many
-- As DueTimers: competing sweeps skip each other's schedules.
SELECT schedule_id, tenant_id, due_at FROM schedule_timer
WHERE due_at <= @now
ORDER BY due_at
LIMIT @max_timers
FOR UPDATE SKIP LOCKED;

-- name: MoveScheduleTimer :exec
UPDATE schedule_timer SET due_at = @due_at WHERE schedule_id = @schedule_id;

-- name: InsertScheduleSlot :execrows
INSERT INTO schedule_slot (schedule_id, slot, tenant_id, event_id, fired_at)
VALUES (@schedule_id, @slot, @tenant_id, @event_id, @fired_at)
ON CONFLICT (schedule_id, slot) DO NOTHING;

-- name: InsertQuerySlot :execrows
-- A query's slot: no single event, the count it selected instead.
INSERT INTO schedule_slot (schedule_id, slot, tenant_id, fired_at, selected, truncated)
VALUES (@schedule_id, @slot, @tenant_id, @fired_at, @selected, @truncated)
ON CONFLICT (schedule_id, slot) DO NOTHING;

-- The declared queries of schedules (schedule.RequestsDueWithin, …): each
-- in the schedule's tenant (the predicate, and row-level security under
-- the tenant's setting), the most urgent first, at most @max_rows. A
-- request's own process only (a reaction's second process is not the
-- request's state).

-- name: SelectRequestsDueWithin :many
SELECT p.id AS process_id, p.request_id, p.service_id, p.correlation_id FROM task t
JOIN process_instance p ON p.id = t.process_id AND p.tenant_id = t.tenant_id
WHERE t.tenant_id = @tenant_id AND t.status = 'open' AND t.due_at > @now AND t.due_at <= @until
  AND p.status = 'running' AND p.subscription_id IS NULL
ORDER BY t.due_at, p.request_id
LIMIT @max_rows;

-- name: SelectRequestsWaitingSince :many
SELECT p.id AS process_id, p.request_id, p.service_id, p.correlation_id FROM task t
JOIN process_instance p ON p.id = t.process_id AND p.tenant_id = t.tenant_id
WHERE t.tenant_id = @tenant_id AND t.status = 'open' AND t.created_at < @since
  AND p.status = 'running' AND p.subscription_id IS NULL
ORDER BY t.created_at, p.request_id
LIMIT @max_rows;

-- name: SelectProcessesInStep :many
SELECT p.id AS process_id, p.request_id, p.service_id, p.correlation_id FROM task t
JOIN process_instance p ON p.id = t.process_id AND p.tenant_id = t.tenant_id
WHERE t.tenant_id = @tenant_id AND t.status = 'open' AND t.step = @step AND p.status = 'running'
ORDER BY t.created_at, p.id
LIMIT @max_rows;

-- name: LastScheduleSlots :many
SELECT * FROM schedule_slot WHERE tenant_id = @tenant_id AND schedule_id = @schedule_id
ORDER BY slot DESC LIMIT @max_slots;

-- name: GetScheduleTimer :one
SELECT due_at FROM schedule_timer WHERE schedule_id = @schedule_id;

-- name: InsertSubscription :one
INSERT INTO subscription (id, version, tenant_id, name, event_types, filter, policy, reaction, agent, state, created_by, created_at, updated_at)
VALUES (@id, @version, @tenant_id, @name, @event_types, @filter, @policy, @reaction, @agent, 'DRAFT', @created_by, @created_at, @created_at)
RETURNING *;

-- name: ListSubscriptionVersions :many
SELECT * FROM subscription WHERE tenant_id = @tenant_id AND id = @id ORDER BY version;

-- name: LatestSubscriptions :many
SELECT DISTINCT ON (id) * FROM subscription WHERE tenant_id = @tenant_id ORDER BY id, version DESC;

-- name: GetSubscriptionVersionForUpdate :one
SELECT * FROM subscription WHERE tenant_id = @tenant_id AND id = @id AND version = @version FOR UPDATE;

-- name: LockSubscription :many
SELECT version FROM subscription WHERE tenant_id = @tenant_id AND id = @id ORDER BY version FOR UPDATE;

-- name: SetSubscriptionState :one
UPDATE subscription SET state = @state, updated_at = @updated_at
WHERE tenant_id = @tenant_id AND id = @id AND version = @version
RETURNING *;

-- name: InsertSubscriptionTransition :exec
INSERT INTO subscription_transition (tenant_id, subscription_id, version, from_state, to_state, actor, reason, at)
VALUES (@tenant_id, @subscription_id, @version, @from_state, @to_state, @actor, @reason, @at);

-- name: ListSubscriptionTransitions :many
SELECT * FROM subscription_transition WHERE tenant_id = @tenant_id AND subscription_id = @subscription_id ORDER BY id;

-- name: ActiveSubscriptionsFor :many
SELECT * FROM subscription WHERE tenant_id = @tenant_id AND state = 'ACTIVE' AND @event_type::text = ANY(event_types) ORDER BY name;

-- name: InsertDecision :execrows
INSERT INTO reaction_decision (id, tenant_id, event_id, event_type, correlation_id, subscription_id, subscription_version,
                               outcome, rule, actor_type, actor, status, detail, review_id, decided_at,
                               entity_type, entity_id, request_id)
VALUES (@id, @tenant_id, @event_id, @event_type, @correlation_id, @subscription_id, @subscription_version,
        @outcome, @rule, @actor_type, @actor, @status, @detail, @review_id, @decided_at,
        sqlc.narg(entity_type), sqlc.narg(entity_id), sqlc.narg(request_id))
ON CONFLICT (event_id, subscription_id) DO NOTHING;

-- name: InsertReview :exec
INSERT INTO reaction_review (id, tenant_id, decision_id, kind, role, created_at, note, due_at)
VALUES (@id, @tenant_id, @decision_id, @kind, @role, @created_at, @note, sqlc.narg(due_at));

-- name: InsertAgentDecision :exec
INSERT INTO agent_decision (decision_id, tenant_id, model, prompt_digest, proposal, passages, knowledge_version, release, failure, created_at,
                            request_id, outcome)
VALUES (@decision_id, @tenant_id, @model, @prompt_digest, @proposal, @passages, @knowledge_version, @release, @failure, @created_at,
        sqlc.narg(request_id), sqlc.narg(outcome));

-- name: AgentDecisionsOf :many
-- The per-event agent steps of decisions (a mass reaction's per-request
-- steps are RequestAgentDecisionsOf).
SELECT * FROM agent_decision WHERE tenant_id = @tenant_id AND decision_id = ANY(@decision_ids::uuid[]) AND request_id IS NULL;

-- name: RequestAgentDecisionsOf :many
SELECT * FROM agent_decision WHERE tenant_id = @tenant_id AND decision_id = ANY(@decision_ids::uuid[])
  AND request_id = ANY(@request_ids::uuid[]);

-- name: AgentOutcomesOf :many
-- What the per-request agent steps of mass reactions led to, counted.
SELECT decision_id, outcome::text AS outcome, count(*)::int AS requests FROM agent_decision
WHERE tenant_id = @tenant_id AND decision_id = ANY(@decision_ids::uuid[]) AND request_id IS NOT NULL
GROUP BY decision_id, outcome ORDER BY decision_id, outcome;

-- name: ReactedInChain :many
-- Which of event_ids (an event's ancestors of its own type) this
-- subscription's reaction already ran on: a repeating pattern.
SELECT event_id FROM reaction_decision
WHERE tenant_id = @tenant_id AND subscription_id = @subscription_id AND event_id = ANY(@event_ids::uuid[])
  AND status = 'executed'
LIMIT 1;

-- name: DecisionsByCorrelation :many
SELECT * FROM reaction_decision WHERE tenant_id = @tenant_id AND correlation_id = @correlation_id ORDER BY decided_at, id;

-- name: DecisionsByEvent :many
SELECT * FROM reaction_decision WHERE tenant_id = @tenant_id AND event_id = @event_id ORDER BY decided_at, id;

-- name: OpenReviews :many
SELECT * FROM reaction_review WHERE tenant_id = @tenant_id AND status = 'open' AND role = ANY(@roles::text[])
ORDER BY created_at, id LIMIT 200;

-- name: GetReviewForUpdate :one
SELECT * FROM reaction_review WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: ResolveReview :one
UPDATE reaction_review SET status = 'resolved', resolution = @resolution, resolved_by = @resolved_by,
    resolved_reason = @resolved_reason, resolved_at = @resolved_at
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: InsertFollowUpReview :exec
INSERT INTO reaction_review (id, tenant_id, decision_id, kind, role, created_at, follows, due_at, request_id, note)
VALUES (@id, @tenant_id, @decision_id, @kind, @role, @created_at, @follows, sqlc.narg(due_at), sqlc.narg(request_id), sqlc.narg(note));

-- name: InsertReviewTimer :exec
INSERT INTO review_timer (review_id, tenant_id, due_at) VALUES (@review_id, @tenant_id, @due_at);

-- name: DeleteReviewTimer :exec
DELETE FROM review_timer WHERE review_id = @review_id;

-- name: DueReviewTimers :many
-- Due timers of every tenant (platform scope), locked so that a competing
-- sweep skips them rather than reporting them again.
SELECT * FROM review_timer WHERE due_at <= @now ORDER BY due_at LIMIT @max_timers FOR UPDATE SKIP LOCKED;

-- name: MarkReviewOverdue :one
UPDATE reaction_review SET overdue_at = @now
WHERE tenant_id = @tenant_id AND id = @id AND status = 'open'
RETURNING *;

-- name: GetDecision :one
SELECT * FROM reaction_decision WHERE tenant_id = @tenant_id AND id = @id;

-- name: ReviewsOfDecisions :many
-- A mass reaction's per-request reviews are counted by its job, not listed.
SELECT * FROM reaction_review WHERE tenant_id = @tenant_id AND decision_id = ANY(@decision_ids::uuid[]) AND request_id IS NULL
ORDER BY created_at, id;

-- name: GetProcessByRequestForUpdate :one
SELECT * FROM process_instance WHERE tenant_id = @tenant_id AND request_id = @request_id AND subscription_id IS NULL FOR UPDATE;

-- name: OpenTaskOfStep :one
SELECT * FROM task WHERE tenant_id = @tenant_id AND process_id = @process_id AND step_index = @step_index AND status = 'open' FOR UPDATE;

-- name: KeepEarlyEvent :execrows
INSERT INTO early_event (tenant_id, request_id, event_type, event_id, event, received_at)
VALUES (@tenant_id, @request_id, @event_type, @event_id, @event, @received_at)
ON CONFLICT (tenant_id, request_id, event_type) DO NOTHING;

-- name: TakeEarlyEvent :one
DELETE FROM early_event WHERE tenant_id = @tenant_id AND request_id = @request_id AND event_type = @event_type
RETURNING event;

-- name: AffectedRequests :one
-- The blast radius of a reaction on a service's open requests.
SELECT count(*)::int AS requests, count(DISTINCT citizen_id)::int AS citizens, count(*)::int AS workflows
FROM process_instance WHERE tenant_id = @tenant_id AND service_id = @service_id AND status = 'running' AND subscription_id IS NULL;

-- name: InsertJob :exec
INSERT INTO reaction_job (id, tenant_id, decision_id, service_id, role, total, status, created_at, updated_at, agent_step, agent_event)
VALUES (@id, @tenant_id, @decision_id, @service_id, @role, @total, @status, @now, @now, @agent_step, @agent_event)
ON CONFLICT (decision_id) DO NOTHING;

-- name: SettleAwaitingJob :one
UPDATE reaction_job SET status = @status, updated_at = @now
WHERE tenant_id = @tenant_id AND decision_id = @decision_id AND status = 'awaiting-approval'
RETURNING id;

-- name: InsertJobTimer :exec
INSERT INTO reaction_job_timer (job_id, tenant_id) VALUES (@job_id, @tenant_id) ON CONFLICT DO NOTHING;

-- name: NextJob :one
SELECT job_id, tenant_id FROM reaction_job_timer LIMIT 1 FOR UPDATE SKIP LOCKED;

-- name: GetJob :one
SELECT * FROM reaction_job WHERE tenant_id = @tenant_id AND id = @id;

-- name: NextAffectedBatch :many
SELECT request_id, definition_id, current_step, started_at FROM process_instance
WHERE tenant_id = @tenant_id AND service_id = @service_id AND status = 'running' AND subscription_id IS NULL AND request_id > @after
ORDER BY request_id LIMIT @max_rows;

-- name: InsertRequestReview :execrows
INSERT INTO reaction_review (id, tenant_id, decision_id, kind, role, created_at, request_id, note)
VALUES (@id, @tenant_id, @decision_id, @kind, @role, @created_at, @request_id, sqlc.narg(note))
ON CONFLICT (decision_id, request_id) WHERE request_id IS NOT NULL AND follows IS NULL DO NOTHING;

-- name: AdvanceJob :exec
UPDATE reaction_job SET done = done + @added, last_request_id = @last_request_id, status = @status, updated_at = @now
WHERE tenant_id = @tenant_id AND id = @id;

-- name: DeleteJobTimer :exec
DELETE FROM reaction_job_timer WHERE job_id = @job_id;

-- name: JobsOfDecisions :many
SELECT * FROM reaction_job WHERE tenant_id = @tenant_id AND decision_id = ANY(@decision_ids::uuid[]);
