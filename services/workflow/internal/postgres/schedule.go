package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/schedule"
)

// CreateSchedule stores spec as a schedule of a's tenant, armed for its
// first slot after now. It returns schedule.ErrInvalid (wrapped, naming
// the field) or schedule.ErrExists.
func (s *Store) CreateSchedule(ctx context.Context, a process.Actor, spec schedule.Spec) (schedule.Schedule, error) {
	sched, loc, err := spec.Check()
	if err != nil {
		return schedule.Schedule{}, err
	}
	id, err := newID()
	if err != nil {
		return schedule.Schedule{}, err
	}
	query, err := storedQuery(spec.Query)
	if err != nil {
		return schedule.Schedule{}, err
	}
	now := s.clock()
	var out schedule.Schedule
	err = s.inTenant(ctx, a.TenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		row, err := q.InsertSchedule(ctx, pgdb.InsertScheduleParams{ID: id, TenantID: a.TenantID, Name: spec.Name, Cron: spec.Cron,
			TimeZone: spec.TimeZone, CatchUp: string(spec.CatchUp), MaxCatchUp: int32(spec.MaxCatchUp), Payload: spec.Payload,
			Query: query, CreatedBy: a.Subject, CreatedAt: now})
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s", schedule.ErrExists, spec.Name)
		}
		if err != nil {
			return fmt.Errorf("insert schedule %s: %w", spec.Name, err)
		}
		next := schedule.Next(sched, loc, now)
		if err := q.InsertScheduleTimer(ctx, pgdb.InsertScheduleTimerParams{ScheduleID: id, TenantID: a.TenantID, DueAt: next}); err != nil {
			return fmt.Errorf("arm schedule %s: %w", spec.Name, err)
		}
		out = scheduleOf(row, &next, nil)
		return nil
	})
	return out, err
}

// Schedules lists the tenant's schedules, each with its next slot (none
// once disabled) and its latest fired slots.
func (s *Store) Schedules(ctx context.Context, tenantID string) ([]schedule.Schedule, error) {
	out := []schedule.Schedule{}
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		rows, err := q.ListSchedules(ctx, tenantID)
		if err != nil {
			return fmt.Errorf("list schedules: %w", err)
		}
		for _, r := range rows {
			var next *time.Time
			due, err := q.GetScheduleTimer(ctx, r.ID)
			switch {
			case err == nil:
				next = &due
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("schedule %s: next slot: %w", r.ID, err)
			}
			slots, err := q.LastScheduleSlots(ctx, pgdb.LastScheduleSlotsParams{TenantID: tenantID, ScheduleID: r.ID, MaxSlots: 5})
			if err != nil {
				return fmt.Errorf("schedule %s: slots: %w", r.ID, err)
			}
			out = append(out, scheduleOf(r, next, slots))
		}
		return nil
	})
	return out, err
}

// DisableSchedule stops a schedule of the tenant: its timer goes, nothing
// fires any more. It returns schedule.ErrNotFound for no such enabled
// schedule in the tenant.
func (s *Store) DisableSchedule(ctx context.Context, tenantID, id string) (schedule.Schedule, error) {
	id, ok := canonicalID(id)
	if !ok {
		return schedule.Schedule{}, schedule.ErrNotFound
	}
	var out schedule.Schedule
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		now := s.clock()
		row, err := q.DisableSchedule(ctx, pgdb.DisableScheduleParams{TenantID: tenantID, ID: id, Now: &now})
		if errors.Is(err, pgx.ErrNoRows) {
			return schedule.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("disable schedule %s: %w", id, err)
		}
		if err := q.DeleteScheduleTimer(ctx, id); err != nil {
			return fmt.Errorf("disarm schedule %s: %w", id, err)
		}
		out = scheduleOf(row, nil, nil)
		return nil
	})
	return out, err
}

// SweepSchedules fires the due slots of up to limit schedules: each due
// timer is locked (SKIP LOCKED), the schedule's catch-up policy decides
// which missed slots fire, each fired slot is recorded under its primary
// key and its workflow.schedule-fired.v1 enqueued in the same transaction,
// and the timer moves to the next slot. A slot therefore fires once
// however many instances sweep, and a crash before the commit leaves the
// timer due for the next sweep. It returns how many events it enqueued.
func (s *Store) SweepSchedules(ctx context.Context, limit int) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("schedule sweep: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := pgdb.New(tx)
	now := s.clock()
	if err := tenant.Platform(ctx, tx); err != nil { // due timers of every tenant
		return 0, fmt.Errorf("schedule sweep: %w", err)
	}
	timers, err := q.DueScheduleTimers(ctx, pgdb.DueScheduleTimersParams{Now: now, MaxTimers: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("schedule sweep: due timers: %w", err)
	}
	fired := 0
	for _, tm := range timers {
		if err := tenant.Set(ctx, tx, tm.TenantID); err != nil {
			return 0, err
		}
		row, err := q.GetSchedule(ctx, pgdb.GetScheduleParams{TenantID: tm.TenantID, ID: tm.ScheduleID})
		if err != nil {
			return 0, fmt.Errorf("schedule sweep: schedule %s: %w", tm.ScheduleID, err)
		}
		spec := specOf(row)
		sched, loc, err := spec.Check()
		if err != nil || !row.Enabled {
			// Stored specs were checked on creation; one that no longer
			// parses (a time zone gone from the system's database) stops
			// rather than firing wrongly.
			if err := q.DeleteScheduleTimer(ctx, tm.ScheduleID); err != nil {
				return 0, fmt.Errorf("schedule sweep: disarm %s: %w", tm.ScheduleID, err)
			}
			continue
		}
		var sel schedule.Selection
		if spec.Query != nil {
			sel, _ = spec.Query.Check() // checked with the spec above
		}
		plan := schedule.Due(sched, loc, tm.DueAt, now, spec.CatchUp, spec.MaxCatchUp)
		for i, slot := range plan.Fire {
			skipped := 0
			if i == 0 {
				skipped = plan.Skipped
			}
			if spec.Query != nil {
				n, err := s.fireQuery(ctx, tx, q, row, sel, slot, now, skipped)
				if err != nil {
					return 0, err
				}
				fired += n
				continue
			}
			env, err := envelope.New(process.TypeScheduleFired, tm.TenantID, process.Producer, payload.ScheduleFired{
				ScheduleID: row.ID, Name: row.Name, Slot: slot, FiredAt: now, Late: now.Sub(slot) > schedule.Grace,
				SkippedBefore: skipped, Payload: row.Payload})
			if err != nil {
				return 0, err
			}
			n, err := q.InsertScheduleSlot(ctx, pgdb.InsertScheduleSlotParams{ScheduleID: row.ID, Slot: slot, TenantID: tm.TenantID,
				EventID: &env.ID, FiredAt: now})
			if err != nil {
				return 0, fmt.Errorf("schedule sweep: record slot %s of %s: %w", slot, row.ID, err)
			}
			if n == 0 {
				continue // fired before (the timer was moved back by hand)
			}
			if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "schedule", ID: row.ID}, Envelope: env}); err != nil {
				return 0, fmt.Errorf("schedule sweep: enqueue slot %s of %s: %w", slot, row.ID, err)
			}
			fired++
		}
		if err := q.MoveScheduleTimer(ctx, pgdb.MoveScheduleTimerParams{ScheduleID: row.ID, DueAt: plan.Next}); err != nil {
			return 0, fmt.Errorf("schedule sweep: move timer of %s: %w", row.ID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("schedule sweep: commit: %w", err)
	}
	return fired, nil
}

func specOf(r pgdb.Schedule) schedule.Spec {
	return schedule.Spec{Name: r.Name, Cron: r.Cron, TimeZone: r.TimeZone, CatchUp: schedule.CatchUp(r.CatchUp),
		MaxCatchUp: int(r.MaxCatchUp), Payload: r.Payload, Query: queryOf(r.Query)}
}

func scheduleOf(r pgdb.Schedule, next *time.Time, slots []pgdb.ScheduleSlot) schedule.Schedule {
	sc := schedule.Schedule{ID: r.ID, Spec: specOf(r), Enabled: r.Enabled, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		DisabledAt: r.DisabledAt, NextAt: next, Fired: []schedule.Slot{}}
	for _, sl := range slots {
		slot := schedule.Slot{At: sl.Slot, EventID: deref(sl.EventID), FiredAt: sl.FiredAt, Truncated: sl.Truncated}
		if sl.Selected != nil {
			n := int(*sl.Selected)
			slot.Selected = &n
		}
		sc.Fired = append(sc.Fired, slot)
	}
	return sc
}
