// Package postgres keeps the lineage of ingested events. Transactions set
// app.tenant_id for row-level security and queries also filter by tenant,
// because superusers (tests, local runs) bypass row-level security.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres/pgdb"
)

// ErrNotFound: no lineage for the event in the tenant; of the fabric's
// kind (404).
var ErrNotFound = fmt.Errorf("lineage %w", fabric.ErrNotFound)

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
	err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		r, err := pgdb.New(tx).GetLineage(ctx, pgdb.GetLineageParams{TenantID: tenantID, EventID: eventID})
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

// Ingest records a batch's lineage around the writing of its files, in one
// transaction: it claims every event first (sorted, tenant by tenant under
// each tenant's app.tenant_id), then calls write with the events this
// batch holds — an event another batch already holds, committed or still
// in flight, is left out, so no event lands in two files — and finally
// points the claimed lineage rows at the files write returns. An error
// from write, or from the commit, rolls every claim back. It returns how
// many events were new.
func (s *Store) Ingest(ctx context.Context, batchID, bucket string, rows []Lineage, write func(fresh map[string]bool) ([]Lineage, error)) (int, error) {
	sorted := append([]Lineage(nil), rows...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].TenantID != sorted[j].TenantID {
			return sorted[i].TenantID < sorted[j].TenantID
		}
		return sorted[i].EventID < sorted[j].EventID
	})
	fresh := map[string]bool{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := pgdb.New(tx)
		for _, group := range byTenant(sorted) {
			t := group[0].TenantID
			p := pgdb.ClaimLineageParams{TenantID: t, Bucket: bucket, BatchID: batchID}
			for _, l := range group {
				p.EventIds = append(p.EventIds, l.EventID)
				p.EventTypes = append(p.EventTypes, l.EventType)
				p.Producers = append(p.Producers, l.Producer)
				p.CorrelationIds = append(p.CorrelationIds, l.CorrelationID)
				p.OccurredAts = append(p.OccurredAts, l.OccurredAt)
			}
			if err := tenant.Set(ctx, tx, t); err != nil {
				return err
			}
			ids, err := q.ClaimLineage(ctx, p)
			if err != nil {
				return fmt.Errorf("claim events of tenant %s: %w", t, err)
			}
			for _, id := range ids {
				fresh[id] = true
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		placed, err := write(fresh)
		if err != nil {
			return err
		}
		for _, group := range byTenant(placed) {
			t := group[0].TenantID
			p := pgdb.PlaceLineageParams{TenantID: t, BatchID: batchID}
			for _, l := range group {
				p.EventIds = append(p.EventIds, l.EventID)
				p.ObjectKeys = append(p.ObjectKeys, l.ObjectKey)
				p.RowOffsets = append(p.RowOffsets, int32(l.RowOffset))
			}
			if err := tenant.Set(ctx, tx, t); err != nil {
				return err
			}
			n, err := q.PlaceLineage(ctx, p)
			if err != nil {
				return fmt.Errorf("place events of tenant %s: %w", t, err)
			}
			if n != int64(len(group)) {
				return fmt.Errorf("placed %d of tenant %s's %d events", n, t, len(group))
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("ingest batch %s: %w", batchID, err)
	}
	return len(fresh), nil
}

// ObjectHasLineage reports whether committed lineage of tenantID points at
// key, a file of batchID: a file without it was left by a flush that
// never committed (the orphan sweep of package messaging).
func (s *Store) ObjectHasLineage(ctx context.Context, tenantID, batchID, key string) (bool, error) {
	var ok bool
	err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		var err error
		ok, err = pgdb.New(tx).ObjectHasLineage(ctx, pgdb.ObjectHasLineageParams{TenantID: tenantID, BatchID: batchID, ObjectKey: key})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lineage of %s: %w", key, err)
	}
	return ok, nil
}

// Position is a place in a tenant's history: events sort by
// (OccurredAt, EventID).
type Position struct {
	OccurredAt time.Time
	EventID    string
}

// HistoryQuery selects a page of a tenant's stored events. From and To
// bound OccurredAt (From ≤ t < To) and are required: callers pass the
// widest range for an absent bound. Types and CorrelationID are ignored
// when empty; After, when set, starts the page after that position.
type HistoryQuery struct {
	Types         []string
	CorrelationID string
	From, To      time.Time
	After         *Position
	Limit         int
}

// Located is where a stored event is: its lineage, as a history page
// needs it.
type Located struct {
	EventID       string
	EventType     string
	Bucket        string
	ObjectKey     string
	RowOffset     int
	CorrelationID string
	OccurredAt    time.Time
}

// nilUUID sorts before every event id: the position before From.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// History returns up to q.Limit events of tenantID in (occurredAt, id)
// order, each located in the lake.
func (s *Store) History(ctx context.Context, tenantID string, q HistoryQuery) ([]Located, error) {
	p := pgdb.ListHistoryParams{TenantID: tenantID, FromTime: q.From, ToTime: q.To, AfterTime: q.From, AfterID: nilUUID,
		EventTypes: q.Types, CorrelationID: q.CorrelationID, MaxRows: int32(q.Limit)}
	if p.EventTypes == nil {
		p.EventTypes = []string{}
	}
	if q.After != nil {
		p.AfterTime, p.AfterID = q.After.OccurredAt, q.After.EventID
	}
	var out []Located
	err := tenant.Tx(ctx, s.pool, tenantID, func(tx pgx.Tx) error {
		rows, err := pgdb.New(tx).ListHistory(ctx, p)
		if err != nil {
			return err
		}
		out = make([]Located, len(rows))
		for i, r := range rows {
			out[i] = Located{EventID: r.EventID, EventType: r.EventType, Bucket: r.Bucket, ObjectKey: r.ObjectKey,
				RowOffset: int(r.RowOffset), CorrelationID: r.CorrelationID, OccurredAt: r.OccurredAt.UTC()}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("history of tenant %s: %w", tenantID, err)
	}
	return out, nil
}

// byTenant splits rows by tenant, tenants in the order they first appear
// and rows in their order within each.
func byTenant(rows []Lineage) [][]Lineage {
	var out [][]Lineage
	idx := map[string]int{}
	for _, l := range rows {
		i, ok := idx[l.TenantID]
		if !ok {
			i = len(out)
			idx[l.TenantID] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], l)
	}
	return out
}
