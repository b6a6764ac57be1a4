package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agora-platform/agora/e2e/harness"
)

// BenchmarkRequestFlowLatency starts request, workflow, communication (with
// a real SMTP sink), analytics and datalake-ingestion, submits requests
// through REST at a fixed rate and reports the latency from the moment the
// client sends POST /v1/requests until all four consumers are done with it:
// workflow started the process, communication sent the mail, analytics
// counted it and the data lake wrote its Parquet object and lineage. The
// data lake flushes a batch at 500 events or after DATALAKE_BATCH_AGE
// (250 ms here, the service default of 2 s with BENCH_SETTINGS=production),
// which bounds its share.
//
// Parameters (environment):
//
//	BENCH_RATE=20 BENCH_SECONDS=10          one step (the default)
//	BENCH_STEPS=25,50,100,200,400 BENCH_SECONDS=30
//	                                        steps through the rates on one platform,
//	                                        draining between steps, and prints a table
//	BENCH_TRACES=off                        no span export (the harness otherwise writes
//	                                        every span to a file, as tests need)
//	BENCH_PPROF=1                           profiles of request, workflow, communication,
//	                                        analytics, datalake on 127.0.0.1:6061…6065
//	BENCH_WARMUP=off                        no warm-up: by default 200 requests at 50/s
//	                                        run first, then ANALYZE (see warmUp)
//	BENCH_STATEMENTS=1                      each step also prints PostgreSQL's top
//	                                        statements per request (pg_stat_statements
//	                                        must be in shared_preload_libraries)
//	BENCH_SETTINGS=production               the services as a deployment runs them, for
//	                                        cost per request: notices coalesced over the
//	                                        default window (one mail per request, not
//	                                        two), the data lake's default batch age (2 s,
//	                                        not 250 ms) and spans sampled at 10 % of traces
//	                                        (OTEL_TRACES_SAMPLER=parentbased_traceidratio,
//	                                        OTEL_TRACES_SAMPLER_ARG=0.1, unless set);
//	                                        by default the latency settings: every
//	                                        notice mailed at once, every span written
//
// The highest step whose p99 (POST → workflow, communication and analytics
// done) stays ≤ 100 ms is the sustainable rate.
func BenchmarkRequestFlowLatency(b *testing.B) {
	rates, seconds, err := benchParams(os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		p := startFlowPlatform(b)
		if os.Getenv("BENCH_WARMUP") != "off" {
			p.warmUp(b)
		}
		var results []stepResult
		for _, rate := range rates {
			r := p.step(b, rate, seconds)
			results = append(results, r)
			// Printed, not logged: the testing package cuts a
			// benchmark's log to ten lines.
			fmt.Printf("%s\n", r)
		}
		if len(results) == 1 {
			r := results[0]
			b.ReportMetric(float64(r.done), "requests")
			b.ReportMetric(ms(pct(r.all4, 0.50)), "all4_p50_ms")
			b.ReportMetric(ms(pct(r.all4, 0.99)), "all4_p99_ms")
			b.ReportMetric(ms(pct(r.sync3, 0.99)), "wf_cm_an_p99_ms")
			for name, d := range r.per {
				b.ReportMetric(ms(pct(d, 0.50)), name+"_p50_ms")
			}
			continue
		}
		b.Logf("\n%s", stepTable(results))
		if line, premium := quietPremium(results); line != "" {
			fmt.Println(line)
			b.ReportMetric(premium, "quiet_premium_x")
		}
	}
}

// quietPremium compares the platform's CPU per request at the slowest
// step with the fastest: batches form only under load, so a quiet
// platform pays per message what a busy one shares (target: at most 1.5×).
func quietPremium(rs []stepResult) (string, float64) {
	slow, fast := rs[0], rs[0]
	for _, r := range rs {
		if r.rate < slow.rate {
			slow = r
		}
		if r.rate > fast.rate {
			fast = r
		}
	}
	if slow.rate == fast.rate || fast.platformMs <= 0 {
		return "", 0
	}
	x := slow.platformMs / fast.platformMs
	return fmt.Sprintf("quiet premium: %.1f ms of platform CPU per request at %d req/s, %.2f× the %.1f ms at %d req/s (target ≤ 1.5×)",
		slow.platformMs, slow.rate, x, fast.platformMs, fast.rate), x
}

// benchParams reads BENCH_RATE, BENCH_STEPS and BENCH_SECONDS.
func benchParams(getenv func(string) string) (rates []int, seconds int, err error) {
	seconds = 10
	if v := getenv("BENCH_SECONDS"); v != "" {
		if seconds, err = strconv.Atoi(v); err != nil || seconds <= 0 {
			return nil, 0, fmt.Errorf("BENCH_SECONDS=%q: want a positive number of seconds", v)
		}
	}
	list := getenv("BENCH_STEPS")
	if list == "" {
		list = getenv("BENCH_RATE")
	}
	if list == "" {
		list = "20"
	}
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, 0, fmt.Errorf("rate %q in BENCH_STEPS/BENCH_RATE: want positive requests per second", f)
		}
		rates = append(rates, n)
	}
	return rates, seconds, nil
}

// benchMailDir is where the benchmark's SMTP sink writes its mails: in
// memory (/dev/shm) where the machine has it. The sink stands in for a
// mail relay the platform does not own, and on disk it cost the box more
// than any service but the request service: a perf profile at 75 req/s
// put 6.7 % of the machine's CPU in the sink, three quarters of it ext4
// allocating an inode per mail in a directory of thousands.
func benchMailDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "agora-bench-mail-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

type flowPlatform struct {
	h      *harness.Harness
	db     *pgxpool.Pool
	token  string
	serial int
	total  int // requests accepted in all steps so far
}

func startFlowPlatform(b *testing.B) *flowPlatform {
	h := harness.New(b, os.Getenv)
	smtp := harness.StartSMTPSink(b, benchMailDir(b))
	production := os.Getenv("BENCH_SETTINGS") == "production"
	if s := os.Getenv("BENCH_SETTINGS"); s != "" && !production {
		b.Fatalf("BENCH_SETTINGS=%q: want production, or unset for the latency settings", s)
	}
	// BENCH_PPROF=1 serves each service's profiles on 127.0.0.1:6061…6065
	// (in start order) for `go tool pprof` while a step runs.
	debug := func(port int, env harness.Env) harness.Env {
		if os.Getenv("BENCH_PPROF") != "" {
			env["DEBUG_ADDR"] = fmt.Sprintf("127.0.0.1:%d", port)
		}
		if os.Getenv("BENCH_TRACES") == "off" {
			env["OTEL_TRACES_FILE"] = "" // as in production without a collector
		}
		if production {
			// The OpenTelemetry SDK reads these; a deployment samples.
			env["OTEL_TRACES_SAMPLER"] = cmp.Or(os.Getenv("OTEL_TRACES_SAMPLER"), "parentbased_traceidratio")
			env["OTEL_TRACES_SAMPLER_ARG"] = cmp.Or(os.Getenv("OTEL_TRACES_SAMPLER_ARG"), "0.1")
		}
		return env
	}
	// One tenant offers every step's rate: the figure is the platform's,
	// not the per-tenant submission limit's, which is on by default.
	h.Start(b, "request", debug(6061, harness.Env{"SUBMIT_RATE_PER_TENANT": "0"}))
	h.Start(b, "workflow", debug(6062, harness.Env{}))
	// No coalescing window: the figure is the pipeline's latency to the
	// mail, not the wait a window adds on purpose (NOTICE_COALESCE_WINDOW).
	notices := harness.Env{"SMTP_ADDR": smtp, "NOTICE_COALESCE_WINDOW": "0"}
	if production {
		delete(notices, "NOTICE_COALESCE_WINDOW") // the service's default window
	}
	h.Start(b, "communication", debug(6063, notices))
	h.Start(b, "analytics", debug(6064, harness.Env{}))
	// A batch age of 250 ms bounds the data lake's share of the latency;
	// a deployment keeps the service's default (2 s), which writes a
	// Parquet file (and its lineage) eight times less often when quiet.
	lake := harness.Env{"DATALAKE_BATCH_AGE": "250ms"}
	if production {
		delete(lake, "DATALAKE_BATCH_AGE")
	}
	h.Start(b, "datalake-ingestion", debug(6065, lake))
	tenantID, citizen := "org-bench", "citizen-bench"
	token := h.Token(tenantID, citizen, "citizen")
	put, _ := http.NewRequest(http.MethodPut, h.URL("communication")+"/v1/contacts/"+citizen,
		bytes.NewBufferString(`{"email":"bench@example.org","preferredChannel":"email"}`))
	put.Header.Set("Authorization", "Bearer "+token)
	put.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode >= 300 {
		b.Fatalf("register contact: %v %v", resp, err)
	}
	db, err := pgxpool.New(context.Background(), h.DatabaseURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	return &flowPlatform{h: h, db: db, token: token}
}

// warmUp runs 200 requests through the platform and then ANALYZEs the
// database, so the steps measure a platform in its steady state. A fresh
// database has no statistics: until autovacuum's first ANALYZE (a minute
// or more), the generic plans that each connection caches after five
// executions may pick an index that matches only the tenant (all the
// benchmark's rows) for a lookup by tenant and id, and keep it: measured
// on 2026-12-01, communication's MarkSent then read some 2,000 index
// entries per call and held communication's p50 near 8 s at 200 req/s.
// ANALYZE invalidates those plans.
func (p *flowPlatform) warmUp(b *testing.B) {
	b.Helper()
	r := p.step(b, 50, 4)
	if r.done != r.sent {
		b.Fatalf("warm-up: %d of %d requests done", r.done, r.sent)
	}
	if _, err := p.db.Exec(context.Background(), "ANALYZE"); err != nil {
		b.Fatalf("warm-up: ANALYZE: %v", err)
	}
}

// stepResult is one rate's outcome. all4 is POST → all four consumers done;
// sync3 leaves out the data lake, whose share is bounded by its batch age.
type stepResult struct {
	rate, seconds int
	sent, done    int
	accepted      float64 // POSTs answered 201 per second of the step
	all4, sync3   []time.Duration
	per           map[string][]time.Duration
	cost          string  // costPerRequest of the step, drain included
	platformMs    float64 // the platform's CPU per request of the step
}

func (r stepResult) String() string {
	return fmt.Sprintf("%s\n    %s", r.latencies(), r.cost)
}

func (r stepResult) latencies() string {
	return fmt.Sprintf("rate %d/s × %d s: accepted %.1f/s, done %d/%d; p50/p99 ms: wf+cm+an %.0f/%.0f, all four %.0f/%.0f, "+
		"workflow %.0f/%.0f, communication %.0f/%.0f, analytics %.0f/%.0f, datalake %.0f/%.0f",
		r.rate, r.seconds, r.accepted, r.done, r.sent, ms(pct(r.sync3, .5)), ms(pct(r.sync3, .99)), ms(pct(r.all4, .5)), ms(pct(r.all4, .99)),
		ms(pct(r.per["workflow"], .5)), ms(pct(r.per["workflow"], .99)), ms(pct(r.per["communication"], .5)), ms(pct(r.per["communication"], .99)),
		ms(pct(r.per["analytics"], .5)), ms(pct(r.per["analytics"], .99)), ms(pct(r.per["datalake"], .5)), ms(pct(r.per["datalake"], .99)))
}

func stepTable(rs []stepResult) string {
	var w strings.Builder
	w.WriteString("| offered req/s | accepted req/s | done | wf+cm+an p50 / p99 ms | workflow p99 | communication p99 | analytics p99 | datalake p50 / p99 ms |\n")
	w.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&w, "| %d | %.1f | %d/%d | %.0f / %.0f | %.0f | %.0f | %.0f | %.0f / %.0f |\n", r.rate, r.accepted, r.done, r.sent,
			ms(pct(r.sync3, .5)), ms(pct(r.sync3, .99)), ms(pct(r.per["workflow"], .99)), ms(pct(r.per["communication"], .99)),
			ms(pct(r.per["analytics"], .99)), ms(pct(r.per["datalake"], .5)), ms(pct(r.per["datalake"], .99)))
	}
	return w.String()
}

// step offers rate requests per second for seconds, then waits until every
// accepted request is done by all four consumers (the platform is drained
// before the next step) and returns the latencies.
func (p *flowPlatform) step(b *testing.B, rate, seconds int) stepResult {
	var mu sync.Mutex
	sent := map[string]time.Time{} // request id → when the client sent it
	var wg sync.WaitGroup
	statements := os.Getenv("BENCH_STATEMENTS") != ""
	if statements {
		resetStatements(b, p.db)
	}
	before := sampleCost(b, p.h, p.db)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	began := time.Now()
	for range rate * seconds {
		<-tick.C
		p.serial++
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			body := fmt.Sprintf(`{"serviceId":"bench","formId":"f","formVersion":1,"channel":"web","fields":{"n":%d}}`, n)
			req, _ := http.NewRequest(http.MethodPost, p.h.URL("request")+"/v1/requests", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+p.token)
			req.Header.Set("Content-Type", "application/json")
			at := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusCreated {
				b.Errorf("submit: %v %v", resp, err)
				return
			}
			defer resp.Body.Close()
			var receipt struct {
				ID string `json:"id"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&receipt); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			sent[receipt.ID] = at
			mu.Unlock()
		}(p.serial)
	}
	tick.Stop()
	wg.Wait()
	r := stepResult{rate: rate, seconds: seconds, sent: len(sent), accepted: float64(len(sent)) / time.Since(began).Seconds()}
	ids := make([]string, 0, len(sent))
	for id := range sent {
		ids = append(ids, id)
	}

	ctx := context.Background()
	p.total += len(sent)
	// Wait with cheap whole-table counts (the tables hold this benchmark's
	// requests only), so the waiting does not load the database whose
	// cost is being measured; the per-request join runs once, after the
	// cost sample.
	const progress = `SELECT
		(SELECT count(*) FROM workflow.process_instance),
		-- A request is done for communication when a notice of it was
		-- mailed: its confirmation, or (notices coalesced) the notice
		-- that superseded it.
		(SELECT count(DISTINCT request_id) FROM communication.notification WHERE status = 'sent'),
		(SELECT count(*) FROM analytics.inbox_message WHERE event_type = 'request.submitted.v1'),
		(SELECT count(*) FROM datalake_ingestion.lineage WHERE event_type = 'request.submitted.v1')`
	deadline := time.Now().Add(time.Duration(max(120, 4*seconds)) * time.Second)
	for {
		var wf, cm, an, dl int
		if err := p.db.QueryRow(ctx, progress).Scan(&wf, &cm, &an, &dl); err != nil {
			b.Fatalf("progress query: %v", err)
		}
		if min(wf, cm, an, dl) >= p.total {
			break
		}
		if time.Now().After(deadline) {
			b.Logf("rate %d/s: not all %d requests done by all four consumers before the deadline (workflow %d, communication %d, analytics %d, datalake %d)",
				rate, p.total, wf, cm, an, dl)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Counted once everything is done, so the drain is included: work
	// queued during the step is paid for by the step.
	after := sampleCost(b, p.h, p.db)
	r.cost = costPerRequest(before, after, len(sent), runtime.NumCPU())
	r.platformMs = platformPerRequest(before, after, len(sent))
	if statements {
		r.cost += "\n" + topStatements(b, p.db, len(sent))
	}

	// Each consumer's own record of being done, per request.
	done := `SELECT r.id::text, p.started_at, n.sent_at, a.received_at, l.ingested_at
		FROM request.request r
		JOIN workflow.process_instance p ON p.request_id = r.id
		-- The first mail about the request: the confirmation, or the
		-- notice that superseded it when notices are coalesced.
		JOIN LATERAL (SELECT min(sent_at) AS sent_at FROM communication.notification
			WHERE request_id = r.id AND status = 'sent') n ON n.sent_at IS NOT NULL
		JOIN analytics.inbox_message a ON a.event_id = r.correlation_id
		JOIN datalake_ingestion.lineage l ON l.event_id = r.correlation_id
		WHERE r.id = ANY($1::uuid[])`
	rows, err := p.db.Query(ctx, done, ids)
	if err != nil {
		b.Fatalf("latency query: %v", err)
	}
	defer rows.Close()
	r.per = map[string][]time.Duration{}
	for rows.Next() {
		var id string
		var wf, cm, an, dl time.Time
		if err := rows.Scan(&id, &wf, &cm, &an, &dl); err != nil {
			b.Fatal(err)
		}
		at := sent[id]
		r.sync3 = append(r.sync3, latest(wf, cm, an).Sub(at))
		r.all4 = append(r.all4, latest(wf, cm, an, dl).Sub(at))
		r.per["workflow"] = append(r.per["workflow"], wf.Sub(at))
		r.per["communication"] = append(r.per["communication"], cm.Sub(at))
		r.per["analytics"] = append(r.per["analytics"], an.Sub(at))
		r.per["datalake"] = append(r.per["datalake"], dl.Sub(at))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	r.done = len(r.all4)
	return r
}

func latest(ts ...time.Time) time.Time {
	out := ts[0]
	for _, t := range ts[1:] {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
