package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/migrations"
	"github.com/agora-platform/agora/services/ai-builder/internal/embed"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
	"github.com/agora-platform/agora/services/ai-builder/internal/postgres"
	aimigrations "github.com/agora-platform/agora/services/ai-builder/migrations"
)

// vocabulary is a deterministic set of Portuguese-looking words, so
// synthetic chunks spread over the hashed feature space like real text.
func vocabulary(n int, rng *rand.Rand) []string {
	syl := []string{"ca", "de", "ri", "to", "men", "sa", "ção", "pre", "fei", "tu", "ra", "al", "va", "lo", "do", "ci",
		"da", "no", "ter", "pa", "go", "ne", "vi", "lei", "con", "tri", "bu", "in", "te", "por", "que", "ma"}
	words := make([]string, n)
	for i := range words {
		var sb strings.Builder
		for range 2 + rng.IntN(3) {
			sb.WriteString(syl[rng.IntN(len(syl))])
		}
		words[i] = sb.String()
	}
	return words
}

// Documents are about something: each draws 70 % of its words from its
// topic's vocabulary of 60 words and the rest from the whole vocabulary.
// (A corpus of uniformly random words has no neighbourhoods at all, the
// worst case for an HNSW graph; real documents sit in between.)
const (
	topics        = 500
	wordsPerTopic = 60
)

func topicalText(words []string, topic, n int, rng *rand.Rand) string {
	parts := make([]string, n)
	for i := range parts {
		if rng.Float64() < 0.7 {
			parts[i] = words[(topic*37+rng.IntN(wordsPerTopic)*101)%len(words)]
		} else {
			parts[i] = words[rng.IntN(len(words))]
		}
	}
	return strings.Join(parts, " ") + "."
}

func sentence(words []string, n int, rng *rand.Rand) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[rng.IntN(len(words))]
	}
	return strings.Join(parts, " ") + "."
}

// BenchmarkIndexing measures indexing throughput through the running
// service: ai.knowledge.index.v1 in, text read from MinIO, chunked,
// embedded (offline hashing embedder), written with the partition's HNSW
// index, ai.knowledge-indexed.v1 out. Each document is ~8,000 characters.
// Run: go test ./services/ai-builder/cmd/ai-builder -run '^$' -bench Indexing -benchtime 40x
func BenchmarkIndexing(b *testing.B) {
	s := newStack(b)
	s.start(nil)
	rng := rand.New(rand.NewPCG(1, 2))
	words := vocabulary(3000, rng)
	tenantID := deploytest.Unique("org-bench-")
	docs := make([]string, b.N)
	keys := make([]string, b.N)
	for i := range docs {
		var sb strings.Builder
		for sb.Len() < 8000 {
			sb.WriteString(sentence(words, 8+rng.IntN(10), rng) + " ")
		}
		docs[i] = uuid.NewString()
		keys[i] = s.putText(tenantID, docs[i], sb.String())
	}
	b.ResetTimer()
	start := time.Now()
	for i := range docs {
		s.index(tenantID, docs[i], keys[i])
	}
	chunks := 0
	for _, d := range docs {
		chunks += s.waitIndexed(d, 1).Chunks
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(chunks)/elapsed.Seconds(), "chunks/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "docs/s")
}

// benchSchema keeps the retrieval data set between runs: seeding 200,000
// chunks and building their HNSW indexes takes minutes on two shared
// cores. BENCH_RESEED=1 rebuilds it; DROP SCHEMA bench_ai_builder CASCADE
// removes it.
const benchSchema = "bench_ai_builder"

// BenchmarkChatRetrieval measures the chat's retrieval path (embed the
// question, search the caller's partition through its HNSW index, compose
// the extractive answer) with 100,000 chunks in one tenant, and with 1,000
// tenants of 100 chunks each (a random tenant per question). It reports
// p50 and p95 latency; the target is p95 ≤ 50 ms.
// Run: go test ./services/ai-builder/cmd/ai-builder -run '^$' -bench ChatRetrieval -benchtime 2000x
func BenchmarkChatRetrieval(b *testing.B) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(fabrictest.EnvFrom(os.Getenv).DatabaseURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = benchSchema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		b.Fatalf("postgres (run `make infra`): %v", err)
	}
	defer pool.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	words := vocabulary(3000, rng)
	seedRetrieval(b, pool, words)

	ef := 400 // the service's default (AI_HNSW_EF_SEARCH)
	if v := os.Getenv("BENCH_EF_SEARCH"); v != "" {
		if ef, err = strconv.Atoi(v); err != nil {
			b.Fatalf("BENCH_EF_SEARCH: %v", err)
		}
	}
	store := postgres.New(pool, nil, benchSchema, ef)
	chat := knowledge.NewChat(embed.NewHash(384), store, nil)
	many := make([]string, 1000)
	for i := range many {
		many[i] = fmt.Sprintf("bench-t%04d", i)
	}
	cases := []struct {
		name    string
		tenants []string
		index   bool
	}{
		{"one-tenant-100k-chunks", []string{"bench-big"}, true},
		{"1000-tenants-100-chunks-each", many, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			checkPlan(b, pool, c.tenants[0], words, c.index)
			qs := sampleQuestions(b, pool, c.tenants, 200, rng)
			recall, hit := quality(b, pool, store, qs)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				q := qs[i%len(qs)]
				t0 := time.Now()
				ans, err := chat.Ask(ctx, q.tenantID, q.text, 5)
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if len(ans.Citations) != 5 {
					b.Fatalf("%d citations for tenant %s, want 5", len(ans.Citations), q.tenantID)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.95), "p95-ms")
			b.ReportMetric(recall, "recall@5")
			b.ReportMetric(hit, "source-hit@5")
		})
	}
}

// benchQuestion is six consecutive words of a stored chunk, asked as its tenant.
type benchQuestion struct {
	tenantID, chunkID, text string
}

func sampleQuestions(b *testing.B, pool *pgxpool.Pool, tenants []string, n int, rng *rand.Rand) []benchQuestion {
	ctx := context.Background()
	var qs []benchQuestion
	for len(qs) < n {
		tenantID := tenants[rng.IntN(len(tenants))]
		var chunkID, content string
		if err := pool.QueryRow(ctx, `SELECT chunk_id::text, content FROM chunk WHERE tenant_id = $1
			OFFSET $2 LIMIT 1`, tenantID, rng.IntN(90)).Scan(&chunkID, &content); err != nil {
			b.Fatal(err)
		}
		w := strings.Fields(strings.TrimSuffix(content, "."))
		at := rng.IntN(len(w) - 6)
		qs = append(qs, benchQuestion{tenantID, chunkID, strings.Join(w[at:at+6], " ")})
	}
	return qs
}

// quality compares the HNSW answers of the first 50 questions with exact
// nearest neighbours (index scans off). recall@5 counts an answer as right
// when it is at least as near as the exact fifth (ties are common with a
// lexical embedder); source-hit@5 is the share of questions whose source
// chunk is among the five answers.
func quality(b *testing.B, pool *pgxpool.Pool, store *postgres.Store, qs []benchQuestion) (recall, hit float64) {
	ctx := context.Background()
	h := embed.NewHash(384)
	found, total, hits := 0, 0, 0
	for _, q := range qs[:50] {
		vec := h.Vector(q.text)
		approx, err := store.Search(ctx, q.tenantID, vec, 5)
		if err != nil {
			b.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL enable_indexscan = off"); err != nil {
			b.Fatal(err)
		}
		var fifth float64
		err = tx.QueryRow(ctx, `SELECT 1 - (embedding OPERATOR(public.<=>) $2::public.vector) FROM chunk WHERE tenant_id = $1
			ORDER BY embedding OPERATOR(public.<=>) $2::public.vector OFFSET 4 LIMIT 1`, q.tenantID, postgres.VectorText(vec)).Scan(&fifth)
		_ = tx.Rollback(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range approx {
			total++
			if a.Score >= fifth-1e-6 {
				found++
			}
			if a.ChunkID == q.chunkID {
				hits++
			}
		}
	}
	return float64(found) / float64(total), float64(hits) / 50
}

// checkPlan fails the benchmark unless the search touches only the
// tenant's partition and, when requireIndex, uses its HNSW index (for a
// partition of a hundred rows the planner rightly prefers an exact scan).
func checkPlan(b *testing.B, pool *pgxpool.Pool, tenantID string, words []string, requireIndex bool) {
	vec := postgres.VectorText(embed.NewHash(384).Vector(strings.Join(words[:6], " ")))
	rows, err := pool.Query(context.Background(), `EXPLAIN SELECT chunk_id FROM chunk WHERE tenant_id = $1
		ORDER BY embedding OPERATOR(public.<=>) $2::public.vector LIMIT 5`, tenantID, vec)
	if err != nil {
		b.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Count(plan, " on chunk_") != 1 || !strings.Contains(plan, postgres.PartitionName(tenantID)+" chunk") {
		b.Fatalf("search touches other partitions than %s's:\n%s", tenantID, plan)
	}
	if requireIndex && !strings.Contains(plan, postgres.PartitionName(tenantID)+"_hnsw") {
		b.Fatalf("search does not use the partition's HNSW index:\n%s", plan)
	}
}

func seedRetrieval(b *testing.B, pool *pgxpool.Pool, words []string) {
	b.Helper()
	ctx := context.Background()
	if os.Getenv("BENCH_RESEED") != "" {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+benchSchema+" CASCADE"); err != nil {
			b.Fatal(err)
		}
	}
	if err := migrations.CreateSchema(ctx, pool, benchSchema); err != nil {
		b.Fatal(err)
	}
	if err := migrations.ApplyFS(ctx, pool, benchSchema, "service_migrations", aimigrations.FS()); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_seed (name text PRIMARY KEY, chunks integer NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	seeded := func(name string) bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT chunks FROM bench_seed WHERE name = $1", name).Scan(&n)
		return err == nil
	}
	if !seeded("big-topical") {
		t0 := time.Now()
		seedTenant(b, pool, "bench-big", 100_000, words, rng)
		mustExec(b, pool, "INSERT INTO bench_seed VALUES ('big-topical', 100000)")
		b.Logf("seeded 100,000 chunks in one tenant in %s", time.Since(t0).Round(time.Second))
	}
	if !seeded("many-topical") {
		t0 := time.Now()
		for i := range 1000 {
			seedTenant(b, pool, fmt.Sprintf("bench-t%04d", i), 100, words, rng)
		}
		mustExec(b, pool, "INSERT INTO bench_seed VALUES ('many-topical', 100000)")
		b.Logf("seeded 1,000 tenants of 100 chunks in %s", time.Since(t0).Round(time.Second))
	}
}

func mustExec(b *testing.B, pool *pgxpool.Pool, sql string) {
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// seedTenant creates tenantID's partition, COPYs n chunks into it and only
// then builds its HNSW index (far faster than inserting into the index).
func seedTenant(b *testing.B, pool *pgxpool.Pool, tenantID string, n int, words []string, rng *rand.Rand) {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	part := pgx.Identifier{benchSchema, postgres.PartitionName(tenantID)}.Sanitize()
	for _, q := range []string{
		"SET maintenance_work_mem = '1GB'",
		"SET max_parallel_maintenance_workers = 1",
		fmt.Sprintf("DROP TABLE IF EXISTS %s", part),
		fmt.Sprintf("CREATE TABLE %s PARTITION OF chunk FOR VALUES IN ('%s')", part, tenantID),
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	h := embed.NewHash(384)
	pr, pw := io.Pipe()
	go func() {
		var doc string
		var topic int
		for i := range n {
			if i%10 == 0 {
				doc, topic = uuid.NewString(), rng.IntN(topics)
			}
			content := topicalText(words, topic, 30+rng.IntN(20), rng)
			fmt.Fprintf(pw, "%s\t%s\t%s\t%d\t%s\t%s\thash-v1\n", tenantID, uuid.NewString(), doc, i%10, content,
				postgres.VectorText(h.Vector(content)))
		}
		pw.Close()
	}()
	if _, err := conn.Conn().PgConn().CopyFrom(ctx, pr, fmt.Sprintf(
		"COPY %s (tenant_id, chunk_id, document_id, ordinal, content, embedding, embedder) FROM STDIN", part)); err != nil {
		b.Fatalf("copy into %s: %v", part, err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE INDEX %s ON %s USING hnsw (embedding public.vector_cosine_ops)",
		pgx.Identifier{postgres.PartitionName(tenantID) + "_hnsw"}.Sanitize(), part)); err != nil {
		b.Fatalf("hnsw index on %s: %v", part, err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE "+part); err != nil {
		b.Fatal(err)
	}
}
