package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
// first): its number never changes.
func (s *Store) RecordSEI(ctx context.Context, tenantID, requestID, unit string, res process.SEIResult) (process.SEIRegistration, error) {
	var out process.SEIRegistration
	err := s.inTenant(ctx, tenantID, func(_ pgx.Tx, q *pgdb.Queries) error {
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
		return nil
	})
	return out, err
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
