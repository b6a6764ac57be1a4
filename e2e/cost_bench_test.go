package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/e2e/harness"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat: 100
// on every Linux this runs on.
const clockTicks = 100

// costSample is what one request costs the machine, read before and after
// a step: CPU per process name (every process on the box, the services,
// PostgreSQL, RabbitMQ and MinIO included), PostgreSQL commits and WAL
// flushes, and the broker's own message counters for the test's vhost.
type costSample struct {
	cpu       map[string]float64 // process name → CPU seconds (user+system)
	commits   int64              // xact_commit of the test's database
	walSyncs  int64              // pg_stat_wal.wal_sync (the whole cluster)
	published int64              // broker: messages published in the vhost
	delivered int64              // broker: deliveries (consumers' gets included)
}

func sampleCost(b *testing.B, h *harness.Harness, db *pgxpool.Pool) costSample {
	b.Helper()
	s := costSample{cpu: cpuByProcess()}
	ctx := context.Background()
	if err := db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits); err != nil {
		b.Fatalf("pg_stat_database: %v", err)
	}
	if err := db.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&s.walSyncs); err != nil {
		b.Fatalf("pg_stat_wal: %v", err)
	}
	var vh struct {
		MessageStats struct {
			Publish    int64 `json:"publish"`
			DeliverGet int64 `json:"deliver_get"`
		} `json:"message_stats"`
	}
	if err := h.Vhost.Mgmt(http.MethodGet, "/api/vhosts/"+url.PathEscape(h.Vhost.Name), nil, &vh); err != nil {
		b.Fatalf("broker counters: %v", err)
	}
	s.published, s.delivered = vh.MessageStats.Publish, vh.MessageStats.DeliverGet
	return s
}

// cpuByProcess sums utime+stime of every process by its command name.
// Processes that exit between two samples are not counted; the platform's
// processes and their database connections live through a benchmark.
func cpuByProcess() map[string]float64 {
	out := map[string]float64{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lp, rp := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if lp < 0 || rp < lp {
			continue
		}
		name := string(data[lp+1 : rp])
		f := strings.Fields(string(data[rp+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[name] += (ut + st) / clockTicks
	}
	return out
}

// Processes by role, for the split in costPerRequest: what the platform
// itself spends (its services, database, broker and object store), what
// the benchmark's stand-ins spend (the load client and the SMTP sink, which
// stands in for a mail relay the platform does not own), and the rest
// (kernel threads, daemons that happen to run on the box).
var (
	platformProcesses = map[string]bool{"postgres": true, "beam.smp": true, "minio": true, "request": true,
		"workflow": true, "communication": true, "analytics": true, "datalake-ingest": true}
	harnessProcesses = map[string]bool{"e2e.test": true, "smtpsink": true}
)

// costPerRequest renders after−before divided by n requests: CPU in all,
// then by role and by process, and the rate the box's cores could carry at
// the platform's cost (taken at a saturated step, that is the ceiling).
func costPerRequest(before, after costSample, n, cores int) string {
	if n == 0 {
		return "no requests"
	}
	type part struct {
		name string
		ms   float64
	}
	var parts []part
	var total, harness float64
	platform := platformPerRequest(before, after, n)
	for name, v := range after.cpu {
		d := (v - before.cpu[name]) * 1000 / float64(n)
		total += d
		if harnessProcesses[name] {
			harness += d
		}
		if d >= 0.05 { // listed by name; below that, noise
			parts = append(parts, part{name, d})
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].ms != parts[j].ms {
			return parts[i].ms > parts[j].ms
		}
		return parts[i].name < parts[j].name
	})
	var w strings.Builder
	fmt.Fprintf(&w, "per request: CPU %.1f ms (platform %.1f, at most %.0f req/s on %d cores; benchmark client and SMTP sink %.1f, other %.1f; ",
		total, platform, ceiling(platform, cores), cores, harness, total-platform-harness)
	for i, p := range parts {
		if i > 0 {
			w.WriteString(", ")
		}
		fmt.Fprintf(&w, "%s %.2f", p.name, p.ms)
	}
	fmt.Fprintf(&w, "); PostgreSQL commits %.1f, WAL flushes %.1f; broker publishes %.1f, deliveries %.1f",
		float64(after.commits-before.commits)/float64(n), float64(after.walSyncs-before.walSyncs)/float64(n),
		float64(after.published-before.published)/float64(n), float64(after.delivered-before.delivered)/float64(n))
	return w.String()
}

// platformPerRequest is the platform's CPU (services, PostgreSQL,
// RabbitMQ, MinIO) per request between two samples, in milliseconds.
func platformPerRequest(before, after costSample, n int) float64 {
	if n == 0 {
		return 0
	}
	var s float64
	for name, v := range after.cpu {
		if platformProcesses[name] {
			s += v - before.cpu[name]
		}
	}
	return s * 1000 / float64(n)
}

// ceiling is the rate cores carry when each request costs platformMs of
// CPU and nothing else runs: the bound no tuning of waits can pass.
func ceiling(platformMs float64, cores int) float64 {
	if platformMs <= 0 {
		return 0
	}
	return float64(cores) * 1000 / platformMs
}

// resetStatements empties pg_stat_statements, creating the extension in
// the test database if needed. It fails the benchmark with the fix when
// the library is not loaded: the figures would otherwise be missing
// without a word.
func resetStatements(b *testing.B, db *pgxpool.Pool) {
	b.Helper()
	ctx := context.Background()
	var loaded bool
	if err := db.QueryRow(ctx, `SELECT 'pg_stat_statements' = ANY(string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))`).Scan(&loaded); err != nil {
		b.Fatalf("BENCH_STATEMENTS: %v", err)
	}
	if !loaded {
		b.Fatalf("BENCH_STATEMENTS: pg_stat_statements is not loaded; run ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements' as a superuser and restart PostgreSQL")
	}
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatalf("BENCH_STATEMENTS: %v", err)
	}
	if _, err := db.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatalf("BENCH_STATEMENTS: %v", err)
	}
}

// topStatements renders the statements that took PostgreSQL the most
// execution time since resetStatements, per request: calls, rows and
// milliseconds, and the mean time of one call.
func topStatements(b *testing.B, db *pgxpool.Pool, n int) string {
	b.Helper()
	var calls, total float64
	if err := db.QueryRow(context.Background(), `SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0) FROM pg_stat_statements`).Scan(&calls, &total); err != nil {
		b.Fatalf("pg_stat_statements: %v", err)
	}
	rows, err := db.Query(context.Background(), `SELECT calls, rows, total_exec_time, regexp_replace(query, '\s+', ' ', 'g')
		FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 20`)
	if err != nil {
		b.Fatalf("pg_stat_statements: %v", err)
	}
	defer rows.Close()
	var w strings.Builder
	fmt.Fprintf(&w, "PostgreSQL statements per request: %.1f, executing %.2f ms; the top 20 (calls, rows, exec ms; mean µs per call):",
		calls/float64(n), total/float64(n))
	for rows.Next() {
		var calls, nrows int64
		var total float64
		var query string
		if err := rows.Scan(&calls, &nrows, &total, &query); err != nil {
			b.Fatalf("pg_stat_statements: %v", err)
		}
		if len(query) > 110 {
			query = query[:110] + "…"
		}
		fmt.Fprintf(&w, "\n      %5.2f %6.2f %6.3f ms %7.0f µs  %s", float64(calls)/float64(n), float64(nrows)/float64(n),
			total/float64(n), total*1000/float64(max(calls, 1)), query)
	}
	if err := rows.Err(); err != nil {
		b.Fatalf("pg_stat_statements: %v", err)
	}
	return w.String()
}
