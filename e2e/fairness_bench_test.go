package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// BenchmarkTenantFairness measures one tenant's flood against another's
// latency. Tenant B submits at 5/s; its latency is POST /v1/requests →
// the workflow started its process. First B alone, then B while tenant A
// submits at 100/s (20× B), on a platform (request, workflow) without a
// per-tenant limit (SUBMIT_RATE_PER_TENANT=0) and on one with the request
// service's default limit, or with BENCH_FAIR_LIMIT per second (burst the
// same) when set. Reports B's p99 alone and under the flood, their ratio
// (goal with the limit: ≤ 2), and how much of A's flood was accepted.
// BENCH_SECONDS (default 10) is each phase's length.
func BenchmarkTenantFairness(b *testing.B) {
	seconds := benchInt(b, "BENCH_SECONDS", 10)
	limit := os.Getenv("BENCH_FAIR_LIMIT") // empty: the service's default
	for range b.N {
		for _, lim := range []string{"0", limit} {
			h := harness.New(b, os.Getenv)
			env := harness.Env{"OTEL_TRACES_FILE": ""}
			if lim != "" {
				env["SUBMIT_RATE_PER_TENANT"] = lim
			}
			if lim != "" && lim != "0" {
				env["SUBMIT_BURST_PER_TENANT"] = lim
			}
			h.Start(b, "request", env)
			h.Start(b, "workflow", harness.Env{"OTEL_TRACES_FILE": ""})
			discardStatusChanges(b, h)
			db, err := pgxpool.New(context.Background(), h.DatabaseURL)
			if err != nil {
				b.Fatal(err)
			}
			f := fairness{h: h, db: db, a: h.Token("org-flood", "citizen-a", "citizen"), b: h.Token("org-quiet", "citizen-b", "citizen")}
			alone := f.phase(b, seconds, 0)
			flooded := f.phase(b, seconds, 100)
			db.Close()
			// The next platform runs alone on the box, not beside this
			// one and what it still does with the flood it took.
			h.Stop("workflow")
			h.Stop("request")
			name := "limit=" + lim
			switch lim {
			case "0":
				name = "limit=off"
			case "":
				name = "limit=default"
			}
			b.Logf("%s: B p99 alone %.0f ms, under A's flood %.0f ms (×%.1f); A sent %d, accepted %d (%.1f/s), refused %d",
				name, ms(pct(alone.latencies, .99)), ms(pct(flooded.latencies, .99)),
				ms(pct(flooded.latencies, .99))/max(ms(pct(alone.latencies, .99)), 1), flooded.aSent, flooded.aAccepted,
				float64(flooded.aAccepted)/float64(seconds), flooded.aSent-flooded.aAccepted)
			b.ReportMetric(ms(pct(alone.latencies, .99)), name+"_B_alone_p99_ms")
			b.ReportMetric(ms(pct(flooded.latencies, .99)), name+"_B_flooded_p99_ms")
			b.ReportMetric(float64(flooded.aAccepted)/float64(seconds), name+"_A_accepted/s")
		}
	}
}

// discardStatusChanges takes request.status-changed.v1 off the broker in
// a queue of the benchmark's own. Its consumers (communication, analytics)
// are not started here: without a queue bound, the request service's
// relay retries every such event as unroutable, and under a flood those
// retries compete with the very submissions the benchmark times.
func discardStatusChanges(b *testing.B, h *harness.Harness) {
	b.Helper()
	conn := h.Vhost.Dial(b, func(ctx context.Context, c *amqp.Connection) error {
		return topology.Apply(ctx, c, topology.Description{Exchanges: topology.PlatformExchanges()})
	})
	ch, err := conn.Channel(context.Background())
	if err != nil {
		b.Fatalf("status changes: channel: %v", err)
	}
	b.Cleanup(func() { ch.Close() })
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatalf("status changes: declare: %v", err)
	}
	if err := ch.QueueBind(q.Name, "request.status-changed.v1", topology.EventsExchange, false, nil); err != nil {
		b.Fatalf("status changes: bind: %v", err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		b.Fatalf("status changes: consume: %v", err)
	}
	go func() {
		for range deliveries {
		}
	}()
}

type fairness struct {
	h    *harness.Harness
	db   *pgxpool.Pool
	a, b string
}

type phaseResult struct {
	latencies        []time.Duration
	aSent, aAccepted int
}

// phase submits B's requests at 5/s (and A's at aRate/s) for seconds, then
// waits for B's processes and returns B's latencies.
func (f fairness) phase(b *testing.B, seconds, aRate int) phaseResult {
	var res phaseResult
	var aSent, aAccepted atomic.Int64
	stop := make(chan struct{})
	var floodWG sync.WaitGroup
	if aRate > 0 {
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			tick := time.NewTicker(time.Second / time.Duration(aRate))
			defer tick.Stop()
			var inflight sync.WaitGroup
			defer inflight.Wait()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					aSent.Add(1)
					if status, _ := f.submit(f.a); status == http.StatusCreated {
						aAccepted.Add(1)
					}
				}()
			}
		}()
	}
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / 5)
	for range 5 * seconds {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			status, id := f.submit(f.b)
			if status != http.StatusCreated {
				b.Errorf("tenant B's submission answered %d", status)
				return
			}
			mu.Lock()
			sent[id] = at
			mu.Unlock()
		}()
	}
	tick.Stop()
	wg.Wait()
	close(stop)
	floodWG.Wait()
	res.aSent, res.aAccepted = int(aSent.Load()), int(aAccepted.Load())
	deadline := time.Now().Add(2 * time.Minute)
	for id, at := range sent {
		for {
			var started time.Time
			err := f.db.QueryRow(context.Background(), `SELECT started_at FROM workflow.process_instance WHERE request_id = $1`, id).Scan(&started)
			if err == nil {
				res.latencies = append(res.latencies, started.Sub(at))
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("tenant B's request %s has no process after 2 min", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return res
}

// submit posts one request with token and returns the status and the id.
func (f fairness) submit(token string) (int, string) {
	body := fmt.Sprintf(`{"serviceId":"bench","formId":"f","formVersion":1,"channel":"web","fields":{"at":%d}}`, time.Now().UnixNano())
	req, _ := http.NewRequest(http.MethodPost, f.h.URL("request")+"/v1/requests", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var receipt struct {
		ID string `json:"id"`
	}
	if resp.StatusCode == http.StatusCreated {
		_ = json.NewDecoder(resp.Body).Decode(&receipt)
	}
	return resp.StatusCode, receipt.ID
}
