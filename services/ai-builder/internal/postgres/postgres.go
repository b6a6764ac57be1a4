// Package postgres stores chunks and their vectors in the ai-builder's
// schema: table chunk is partitioned by tenant, one partition per tenant
// created on first use with its own HNSW cosine index. Vector SQL (the
// pgvector type and operator live in schema public, outside the service's
// search_path) is written by hand; the rest comes from sqlc (pgdb).
//
// Every query filters by tenant as well as relying on row-level security,
// because superusers (local runs, tests) bypass RLS. The events of what it
// writes go to the outbox in the same transaction.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
	"github.com/agora-platform/agora/services/ai-builder/internal/postgres/pgdb"
)

// Enqueuer stores envelopes in the caller's transaction (outbox.Outbox).
type Enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// Store reads and writes the knowledge tables of one schema.
type Store struct {
	pool   *pgxpool.Pool
	outbox Enqueuer
	schema string
	// known caches partitions that exist, so the common path does not
	// touch the catalog.
	known sync.Map
	// efSearch is the HNSW candidate list size of a search (pgvector's
	// default is 40).
	efSearch int
}

var _ knowledge.Searcher = (*Store)(nil)

// New returns a Store for schema, enqueuing its events in ob, whose
// searches consider efSearch HNSW candidates (at least the k asked for;
// higher is slower and finds more of the true nearest neighbours).
func New(pool *pgxpool.Pool, ob Enqueuer, schema string, efSearch int) *Store {
	return &Store{pool: pool, outbox: ob, schema: schema, efSearch: efSearch}
}

// PartitionName is the table holding tenantID's chunks: chunk_<tenant with
// - as _>, shortened with a hash when it would pass Postgres' 63-byte limit.
func PartitionName(tenantID string) string {
	name := "chunk_" + strings.ReplaceAll(tenantID, "-", "_")
	if len(name) <= 55 { // room for the "_hnsw" index suffix
		return name
	}
	sum := sha256.Sum256([]byte(tenantID))
	return name[:42] + "_" + hex.EncodeToString(sum[:6])
}

// Dimensions returns the dimension of the embedding column, which every
// embedder must produce.
func (s *Store) Dimensions(ctx context.Context) (int, error) {
	var dims int
	err := s.pool.QueryRow(ctx, `SELECT a.atttypmod FROM pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attname = 'embedding'`,
		pgx.Identifier{s.schema, "chunk"}.Sanitize()).Scan(&dims)
	if err != nil {
		return 0, fmt.Errorf("embedding dimension of %s.chunk: %w", s.schema, err)
	}
	return dims, nil
}

// EnsurePartition creates tenantID's partition and its HNSW index when
// missing. The DDL runs in ensure_chunk_partition (migration 00002), with
// the schema owner's rights: the service's role owns nothing. Concurrent
// callers serialise there on a transaction-level advisory lock per tenant.
func (s *Store) EnsurePartition(ctx context.Context, tx pgx.Tx, tenantID string) error {
	if !envelope.ValidTenant(tenantID) {
		return fmt.Errorf("partition for %q: not a tenant id", tenantID)
	}
	if _, ok := s.known.Load(tenantID); ok {
		return nil
	}
	part := PartitionName(tenantID)
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{s.schema, part}.Sanitize()).Scan(&exists); err != nil {
		return fmt.Errorf("look up partition %s: %w", part, err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, "SELECT "+pgx.Identifier{s.schema, "ensure_chunk_partition"}.Sanitize()+"($1, $2)", tenantID, part); err != nil {
			return fmt.Errorf("create partition %s: %w", part, err)
		}
	}
	// Cached only once committed would be stricter; a rolled-back creation
	// at worst makes the next insert fail and retry without the cache.
	s.known.Store(tenantID, struct{}{})
	return nil
}

// Forget drops the partition cache (after a rollback that created one).
func (s *Store) Forget(tenantID string) { s.known.Delete(tenantID) }

// Index swaps doc's chunks for the new ones, records the document and
// enqueues ai.knowledge-indexed.v1, inside tx (whose app.tenant_id is
// doc.TenantID). cause is the command that asked for it.
func (s *Store) Index(ctx context.Context, tx pgx.Tx, doc knowledge.Document, cause envelope.Envelope) error {
	if err := s.replace(ctx, tx, doc, cause.ID); err != nil {
		return err
	}
	indexed, err := knowledge.IndexedEvent(cause, doc)
	if err != nil {
		return fmt.Errorf("derive indexed event of %s: %w", doc.DocumentID, err)
	}
	if err := s.outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "knowledge-document", ID: doc.DocumentID}, Envelope: indexed}); err != nil {
		return fmt.Errorf("enqueue indexed event of %s: %w", doc.DocumentID, err)
	}
	return nil
}

// replace swaps doc's chunks for the new ones and records the document,
// inside tx. eventID is the command that asked for it.
func (s *Store) replace(ctx context.Context, tx pgx.Tx, doc knowledge.Document, eventID string) error {
	if err := s.EnsurePartition(ctx, tx, doc.TenantID); err != nil {
		return err
	}
	q := pgdb.New(tx)
	if _, err := q.DeleteDocumentChunks(ctx, pgdb.DeleteDocumentChunksParams{TenantID: doc.TenantID, DocumentID: doc.DocumentID}); err != nil {
		return fmt.Errorf("delete chunks of %s: %w", doc.DocumentID, err)
	}
	if len(doc.Chunks) > 0 {
		ids := make([]string, len(doc.Chunks))
		ords := make([]int32, len(doc.Chunks))
		contents := make([]string, len(doc.Chunks))
		vecs := make([]string, len(doc.Chunks))
		for i, c := range doc.Chunks {
			ids[i], ords[i], contents[i], vecs[i] = c.ID, int32(c.Ordinal), c.Content, VectorText(c.Vector)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO chunk (tenant_id, chunk_id, document_id, ordinal, content, embedding, embedder)
			SELECT $1, c.id, $2, c.ord, c.content, c.emb::public.vector, $3
			FROM unnest($4::uuid[], $5::int[], $6::text[], $7::text[]) AS c(id, ord, content, emb)`,
			doc.TenantID, doc.DocumentID, doc.Embedder, ids, ords, contents, vecs); err != nil {
			s.Forget(doc.TenantID)
			return fmt.Errorf("insert %d chunks of %s: %w", len(doc.Chunks), doc.DocumentID, err)
		}
	}
	var reqID *string
	if doc.RequestID != "" {
		reqID = &doc.RequestID
	}
	if err := q.UpsertIndexedDocument(ctx, pgdb.UpsertIndexedDocumentParams{
		TenantID: doc.TenantID, DocumentID: doc.DocumentID, RequestID: reqID, TextKey: doc.TextKey,
		Chunks: int32(len(doc.Chunks)), Embedder: doc.Embedder, Dimensions: int32(doc.Dimensions), EventID: eventID,
	}); err != nil {
		return fmt.Errorf("record document %s: %w", doc.DocumentID, err)
	}
	return nil
}

// Search returns the k chunks of tenantID nearest to vector by cosine
// distance, best first, with score = cosine similarity. The tenant filter
// prunes the plan to the tenant's partition, whose HNSW index orders the
// scan; app.tenant_id is set for row-level security as well.
func (s *Store) Search(ctx context.Context, tenantID string, vector []float32, k int) ([]knowledge.Passage, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("search: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := tenant.Set(ctx, tx, tenantID); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	// The HNSW scan yields at most ef_search rows, so never fewer than k.
	if _, err := tx.Exec(ctx, "SELECT set_config('hnsw.ef_search', $1, true)", strconv.Itoa(max(s.efSearch, k))); err != nil {
		return nil, fmt.Errorf("search: set hnsw.ef_search: %w", err)
	}
	vec := VectorText(vector)
	rows, err := tx.Query(ctx, `SELECT chunk_id::text, document_id::text, content,
			1 - (embedding OPERATOR(public.<=>) $2::public.vector) AS score
		FROM chunk WHERE tenant_id = $1
		ORDER BY embedding OPERATOR(public.<=>) $2::public.vector
		LIMIT $3`, tenantID, vec, k)
	if err != nil {
		return nil, fmt.Errorf("search tenant %s: %w", tenantID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (knowledge.Passage, error) {
		var p knowledge.Passage
		err := r.Scan(&p.ChunkID, &p.DocumentID, &p.Content, &p.Score)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("search tenant %s: %w", tenantID, err)
	}
	if err := tx.Commit(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return nil, fmt.Errorf("search: commit: %w", err)
	}
	return out, nil
}

// VectorText is pgvector's text form of v ("[0.1,0.2,…]"). Vectors travel
// as text because the vector type lives outside the service's search_path,
// so pgx cannot register its binary codec by name.
func VectorText(v []float32) string { return pgvector.NewVector(v).String() }
