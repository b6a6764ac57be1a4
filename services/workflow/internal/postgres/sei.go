package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/text"
	"github.com/agora-platform/agora/services/workflow/internal/postgres/pgdb"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// maxSEIError bounds the stored error text in bytes (cut at a character
// boundary): SEI's reason for a rejection, or the last failure.
const maxSEIError = 1000

// SEIRegistration returns the SEI registration of requestID in tenantID;
// false when there is none.
func (s *Store) SEIRegistration(ctx context.Context, tenantID, requestID string) (process.SEIRegistration, bool, error) {
	var out process.SEIRegistration
	found := false
	err := s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
		row, err := q.GetSEIRegistration(ctx, pgdb.GetSEIRegistrationParams{TenantID: tenantID, RequestID: requestID})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get the SEI registration of request %s: %w", requestID, err)
		}
		out, found = fromSEIRow(row), true
		return nil
	})
	return out, found, err
}

// RecordSEI records one call to SEI for requestID and its result, and
// returns the registration as it now stands. A registered request stays
// registered whatever is recorded after (a duplicate command racing the
// first): its number never changes. A registration that becomes rejected
// (the workflow gives up on it: a person must act) emits
// workflow.integration-failed.v1, derived from cause (the command), in
// the same transaction: once, since only the change to rejected does.
func (s *Store) RecordSEI(ctx context.Context, tenantID, requestID, unit string, res process.SEIResult, cause envelope.Envelope) (process.SEIRegistration, error) {
	var out process.SEIRegistration
	err := s.inTenant(ctx, tenantID, func(tx pgx.Tx, q *pgdb.Queries) error {
		before, err := q.GetSEIRegistrationForUpdate(ctx, pgdb.GetSEIRegistrationForUpdateParams{TenantID: tenantID, RequestID: requestID})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("the SEI registration of request %s: %w", requestID, err)
		}
		params := pgdb.RecordSEIAttemptParams{TenantID: tenantID, RequestID: requestID, Status: res.Status,
			Unit: optional(unit), Now: s.clock()}
		if res.Status == process.SEIRegistered {
			params.SeiNumber = &res.Number
		} else {
			params.LastError = optional(text.Truncate(res.Error, maxSEIError))
		}
		row, err := q.RecordSEIAttempt(ctx, params)
		if err != nil {
			return fmt.Errorf("record the SEI registration of request %s: %w", requestID, err)
		}
		out = fromSEIRow(row)
		if out.Status != process.SEIRejected || before.Status == process.SEIRejected {
			return nil
		}
		return s.integrationFailed(ctx, tx, requestID, unit, out, cause)
	})
	return out, err
}

// integrationFailed enqueues workflow.integration-failed.v1 for the
// rejected registration reg of requestID, derived from cause.
func (s *Store) integrationFailed(ctx context.Context, tx pgx.Tx, requestID, unit string, reg process.SEIRegistration, cause envelope.Envelope) error {
	env, err := envelope.Derive(cause, process.TypeIntegrationFailed, process.Producer, process.IntegrationFailed{
		Integration: "sei", Operation: "register", RequestID: requestID, Unit: unit, Failure: "rejected",
		Reason: reg.LastError, Attempts: max(reg.Attempts, 1)})
	if err != nil {
		return fmt.Errorf("integration failure of request %s: %w", requestID, err)
	}
	if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "request", ID: requestID}, Envelope: env}); err != nil {
		return fmt.Errorf("enqueue the integration failure of request %s: %w", requestID, err)
	}
	return nil
}

func fromSEIRow(r pgdb.SeiRegistration) process.SEIRegistration {
	reg := process.SEIRegistration{Status: r.Status, Attempts: int(r.Attempts), RegisteredAt: r.RegisteredAt, UpdatedAt: r.UpdatedAt}
	if r.SeiNumber != nil {
		reg.Number = *r.SeiNumber
	}
	if r.Unit != nil {
		reg.Unit = *r.Unit
	}
	if r.LastError != nil {
		reg.LastError = *r.LastError
	}
	return reg
}
