// Package postgres keeps the lineage of ingested events. Transactions set
// app.tenant_id for row-level security and queries also filter by tenant,
// because superusers (tests, local runs) bypass row-level security.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres/pgdb"
)

// ErrNotFound: no lineage for the event in the tenant.
var ErrNotFound = errors.New("lineage not found")

// Lineage is where one event landed.
type Lineage struct {
	EventID       string    `json:"eventId"`
	TenantID      string    `json:"tenantId"`
	EventType     string    `json:"eventType"`
	Bucket        string    `json:"bucket"`
	ObjectKey     string    `json:"objectKey"`
	RowOffset     int       `json:"rowOffset"`
	BatchID       string    `json:"batchId"`
	Producer      string    `json:"producer"`
	CorrelationID string    `json:"correlationId"`
	OccurredAt    time.Time `json:"occurredAt"`
	IngestedAt    time.Time `json:"ingestedAt"`
}

// Store is the Postgres adapter of the ingestion service.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool (search_path = the service schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Lineage returns the lineage of eventID in tenantID, or ErrNotFound.
func (s *Store) Lineage(ctx context.Context, tenantID, eventID string) (Lineage, error) {
	var out Lineage
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := pgdb.New(tx)
		if err := q.SetTenant(ctx, tenantID); err != nil {
			return err
		}
		r, err := q.GetLineage(ctx, pgdb.GetLineageParams{TenantID: tenantID, EventID: eventID})
		if err != nil {
			return err
		}
		out = Lineage{EventID: r.EventID, TenantID: r.TenantID, EventType: r.EventType, Bucket: r.Bucket,
			ObjectKey: r.ObjectKey, RowOffset: int(r.RowOffset), BatchID: r.BatchID, Producer: r.Producer,
			CorrelationID: r.CorrelationID, OccurredAt: r.OccurredAt, IngestedAt: r.IngestedAt}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return out, fmt.Errorf("event %s: %w", eventID, ErrNotFound)
	}
	if err != nil {
		return out, fmt.Errorf("lineage of %s: %w", eventID, err)
	}
	return out, nil
}

// Ingested reports whether eventID already has lineage in tenantID.
func (s *Store) Ingested(ctx context.Context, tenantID, eventID string) (bool, error) {
	_, err := s.Lineage(ctx, tenantID, eventID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Record inserts the lineage of one batch in one transaction, tenant by
// tenant (each under its own app.tenant_id). It returns how many rows were
// new.
func (s *Store) Record(ctx context.Context, batchID, bucket string, rows []Lineage) (int64, error) {
	byTenant := map[string]*pgdb.InsertLineageParams{}
	var order []string
	for _, l := range rows {
		p := byTenant[l.TenantID]
		if p == nil {
			p = &pgdb.InsertLineageParams{TenantID: l.TenantID, Bucket: bucket, BatchID: batchID}
			byTenant[l.TenantID] = p
			order = append(order, l.TenantID)
		}
		p.EventIds = append(p.EventIds, l.EventID)
		p.EventTypes = append(p.EventTypes, l.EventType)
		p.ObjectKeys = append(p.ObjectKeys, l.ObjectKey)
		p.RowOffsets = append(p.RowOffsets, int32(l.RowOffset))
		p.Producers = append(p.Producers, l.Producer)
		p.CorrelationIds = append(p.CorrelationIds, l.CorrelationID)
		p.OccurredAts = append(p.OccurredAts, l.OccurredAt)
	}
	var inserted int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := pgdb.New(tx)
		for _, t := range order {
			if err := q.SetTenant(ctx, t); err != nil {
				return err
			}
			n, err := q.InsertLineage(ctx, *byTenant[t])
			if err != nil {
				return fmt.Errorf("tenant %s: %w", t, err)
			}
			inserted += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record lineage of batch %s: %w", batchID, err)
	}
	return inserted, nil
}
