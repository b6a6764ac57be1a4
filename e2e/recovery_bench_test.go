package e2e

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkRecoveryThroughServices measures a broker restart under load
// end to end, through REST: the platform (request, workflow,
// communication, analytics, data lake) takes BENCH_RATE submissions a
// second (default 20) throughout; after a quiet start the broker is
// stopped for BENCH_OUTAGE (default 15 s) and started again. It reports how
// long after `rabbitmqctl start_app` returned each service answered
// /readyz with 200 again, and when the last effect (all four consumers'
// records) of the requests accepted during the outage landed. The broker
// is the machine's: run it alone (it is no part of make test).
//
//	go test -run '^$' -bench RecoveryThroughServices -benchtime 1x ./e2e/
func BenchmarkRecoveryThroughServices(b *testing.B) {
	rate, outage := benchInt(b, "BENCH_RATE", 20), 15*time.Second
	if v := os.Getenv("BENCH_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("BENCH_OUTAGE=%q: want a positive duration", v)
		}
		outage = d
	}
	ctl := strings.Fields(cmp.Or(os.Getenv("RABBITMQCTL"), "rabbitmqctl"))
	p := startFlowPlatform(b)
	p.warmUp(b)
	services := []string{"request", "workflow", "communication", "analytics", "datalake-ingestion"}

	// Submissions run throughout, at rate; each records when it was
	// accepted (the request service needs only its database to accept).
	var mu sync.Mutex
	accepted := map[string]time.Time{}
	refused := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Go(func() {
				id, err := submitBench(http.DefaultClient, p.h, p.token, n)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					refused++
					return
				}
				accepted[id] = time.Now()
			})
		}
	})

	time.Sleep(5 * time.Second) // load before the outage: the steady state it interrupts
	run := func(args ...string) {
		cmd := exec.Command(ctl[0], append(ctl[1:], args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v: %s", ctl[0], args, err, out)
		}
	}
	run("stop_app")
	down := time.Now()
	time.Sleep(outage)
	run("start_app")
	back := time.Now()
	run("await_startup")

	// Readiness: each service's /readyz, polled every 100 ms.
	ready := map[string]time.Duration{}
	deadline := back.Add(2 * time.Minute)
	for len(ready) < len(services) && time.Now().Before(deadline) {
		for _, s := range services {
			if _, ok := ready[s]; ok {
				continue
			}
			resp, err := http.Get(p.h.URL(s) + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready[s] = time.Since(back)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(ready) < len(services) {
		b.Fatalf("ready after 2 min: %v of %v", ready, services)
	}
	time.Sleep(5 * time.Second) // load after the outage too
	close(stop)
	wg.Wait()

	// The last effect of the requests accepted while the broker was down.
	mu.Lock()
	var during []string
	for id, at := range accepted {
		if at.After(down) && at.Before(back) {
			during = append(during, id)
		}
	}
	total := len(accepted)
	mu.Unlock()
	p.total += total
	ctx := context.Background()
	const progress = `SELECT least(
		(SELECT count(*) FROM workflow.process_instance),
		(SELECT count(*) FROM communication.notification n JOIN request.request r ON n.source_event_id = r.correlation_id
			WHERE n.status IN ('sent', 'coalesced')),
		(SELECT count(*) FROM analytics.inbox_message WHERE event_type = 'request.submitted.v1'),
		(SELECT count(*) FROM datalake_ingestion.lineage WHERE event_type = 'request.submitted.v1'))`
	for drain := time.Now().Add(3 * time.Minute); ; {
		var done int
		if err := p.db.QueryRow(ctx, progress).Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done >= p.total {
			break
		}
		if time.Now().After(drain) {
			b.Fatalf("after 3 min, %d of %d requests done by all four consumers", done, p.total)
		}
		time.Sleep(250 * time.Millisecond)
	}
	var last time.Time
	if err := p.db.QueryRow(ctx, `SELECT max(greatest(pi.started_at, n.sent_at, a.received_at, l.ingested_at))
		FROM request.request r
		JOIN workflow.process_instance pi ON pi.request_id = r.id
		JOIN communication.notification n ON n.source_event_id = r.correlation_id AND n.status = 'sent'
		JOIN analytics.inbox_message a ON a.event_id = r.correlation_id
		JOIN datalake_ingestion.lineage l ON l.event_id = r.correlation_id
		WHERE r.id = ANY($1::uuid[])`, during).Scan(&last); err != nil {
		b.Fatalf("last effect of the outage's requests: %v", err)
	}
	slowest := slices.Max(slices.Collect(maps.Values(ready)))
	b.ReportMetric(slowest.Seconds(), "s-ready")
	b.ReportMetric(last.Sub(back).Seconds(), "s-last-effect")
	b.Logf("rate %d/s, broker down %v: %d accepted (%d during the outage), %d refused; after start_app: ready %v (slowest %.1f s), last effect of the outage's requests %.1f s",
		rate, outage, total, len(during), refused, ready, slowest.Seconds(), last.Sub(back).Seconds())
}
