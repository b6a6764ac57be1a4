package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/schedule"
)

// selected is one entity a schedule's query selected, with the request it
// belongs to and that request's correlation.
type selected struct {
	entity        envelope.Ref
	requestID     string
	serviceID     string
	correlationID string
}

// selectEntities runs the declared query sel in tenantID, which tx's
// tenant setting must already name (row-level security then holds the
// query to it even if its predicate were wrong). It reads one row more
// than schedule.MaxSelected, so the caller can tell a truncated selection.
func selectEntities(ctx context.Context, q *pgdb.Queries, tenantID string, sel schedule.Selection, now time.Time) ([]selected, error) {
	limit := int32(schedule.MaxSelected + 1)
	var out []selected
	add := func(typ, id, requestID, serviceID, correlationID string) {
		out = append(out, selected{entity: envelope.Ref{Type: typ, ID: id}, requestID: requestID, serviceID: serviceID, correlationID: correlationID})
	}
	switch sel.Name {
	case schedule.RequestsDueWithin:
		rows, err := q.SelectRequestsDueWithin(ctx, pgdb.SelectRequestsDueWithinParams{TenantID: tenantID, Now: now, Until: now.Add(sel.Duration), MaxRows: limit})
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", sel.Name, err)
		}
		for _, r := range rows {
			add("request", r.RequestID, r.RequestID, r.ServiceID, r.CorrelationID)
		}
	case schedule.RequestsWaitingLongerThan:
		rows, err := q.SelectRequestsWaitingSince(ctx, pgdb.SelectRequestsWaitingSinceParams{TenantID: tenantID, Since: now.Add(-sel.Duration), MaxRows: limit})
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", sel.Name, err)
		}
		for _, r := range rows {
			add("request", r.RequestID, r.RequestID, r.ServiceID, r.CorrelationID)
		}
	case schedule.ProcessesInStep:
		rows, err := q.SelectProcessesInStep(ctx, pgdb.SelectProcessesInStepParams{TenantID: tenantID, Step: sel.Step, MaxRows: limit})
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", sel.Name, err)
		}
		for _, r := range rows {
			add("process", r.ProcessID, r.RequestID, r.ServiceID, r.CorrelationID)
		}
	default:
		return nil, fmt.Errorf("query %q: not declared", sel.Name)
	}
	return out, nil
}

// fireQuery fires one slot of a schedule with a query inside the sweep's
// transaction (scoped to the schedule's tenant): the slot is recorded
// first, under its primary key, so a slot another sweep already fired
// selects and emits nothing; then one workflow.schedule-fired.v1 per
// selected entity (at most schedule.MaxSelected), each about its entity
// (the outbox item's aggregate becomes the envelope's entity) and in its
// request's correlation, so the request's story shows the reactions it
// caused. It returns how many events it enqueued.
func (s *Store) fireQuery(ctx context.Context, tx pgx.Tx, q *pgdb.Queries, row pgdb.Schedule, sel schedule.Selection,
	slot, now time.Time, skipped int) (int, error) {
	found, err := selectEntities(ctx, q, row.TenantID, sel, now)
	if err != nil {
		return 0, fmt.Errorf("schedule sweep: slot %s of %s: %w", slot, row.ID, err)
	}
	truncated := len(found) > schedule.MaxSelected
	if truncated {
		found = found[:schedule.MaxSelected]
	}
	n := int32(len(found))
	recorded, err := q.InsertQuerySlot(ctx, pgdb.InsertQuerySlotParams{ScheduleID: row.ID, Slot: slot, TenantID: row.TenantID,
		FiredAt: now, Selected: &n, Truncated: truncated})
	if err != nil {
		return 0, fmt.Errorf("schedule sweep: record slot %s of %s: %w", slot, row.ID, err)
	}
	if recorded == 0 {
		return 0, nil // fired before (the timer was moved back by hand)
	}
	items := make([]outbox.Item, 0, len(found))
	for _, e := range found {
		env, err := envelope.New(process.TypeScheduleFired, row.TenantID, process.Producer, payload.ScheduleFired{
			ScheduleID: row.ID, Name: row.Name, Slot: slot, FiredAt: now, Late: now.Sub(slot) > schedule.Grace,
			SkippedBefore: skipped, Payload: row.Payload, Query: sel.Name, RequestID: e.requestID, ServiceID: e.serviceID})
		if err != nil {
			return 0, fmt.Errorf("schedule sweep: event for %s %s: %w", e.entity.Type, e.entity.ID, err)
		}
		env.CorrelationID = e.correlationID
		items = append(items, outbox.Item{Aggregate: outbox.Aggregate{Type: e.entity.Type, ID: e.entity.ID}, Envelope: env})
	}
	if err := s.outbox.Enqueue(ctx, tx, items...); err != nil {
		return 0, fmt.Errorf("schedule sweep: enqueue slot %s of %s: %w", slot, row.ID, err)
	}
	return len(items), nil
}

// queryOf decodes a stored schedule's query (NULL: none).
func queryOf(raw []byte) *schedule.Query {
	if len(raw) == 0 {
		return nil
	}
	var q schedule.Query
	if err := json.Unmarshal(raw, &q); err != nil {
		// Written by CreateSchedule from a checked query; a row that no
		// longer decodes fails its check at the sweep (an unknown name),
		// which disarms the schedule rather than firing wrongly.
		return &schedule.Query{Name: "undecodable stored query"}
	}
	return &q
}

// storedQuery is the query column CreateSchedule writes (NULL: none).
func storedQuery(q *schedule.Query) ([]byte, error) {
	if q == nil {
		return nil, nil
	}
	stored := *q
	if len(stored.Params) == 0 {
		stored.Params = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("schedule query: %w", err)
	}
	return b, nil
}
