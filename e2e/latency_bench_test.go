package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
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
// (250 ms here; the service default is 2 s), which bounds its share.
func BenchmarkRequestFlowLatency(b *testing.B) {
	const rate, seconds = 20, 10
	for i := 0; i < b.N; i++ {
		h := harness.New(b, os.Getenv)
		smtp := startFlowSMTPSink(b, b.TempDir())
		h.Start(b, "request")
		h.Start(b, "workflow")
		h.Start(b, "communication", harness.Env{"SMTP_ADDR": smtp})
		h.Start(b, "analytics")
		h.Start(b, "datalake-ingestion", harness.Env{"DATALAKE_BATCH_AGE": "250ms"})
		tenantID, citizen := "org-bench", "citizen-bench"
		token := h.Token(tenantID, citizen, "citizen")
		put, _ := http.NewRequest(http.MethodPut, h.URL("communication")+"/v1/contacts/"+citizen,
			bytes.NewBufferString(`{"email":"bench@example.org","preferredChannel":"email"}`))
		put.Header.Set("Authorization", "Bearer "+token)
		put.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode >= 300 {
			b.Fatalf("register contact: %v %v", resp, err)
		}

		var mu sync.Mutex
		sent := map[string]time.Time{} // request id → when the client sent it
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / rate)
		for n := 0; n < rate*seconds; n++ {
			<-tick.C
			wg.Add(1)
			go func(n int) {
				defer wg.Done()
				body := fmt.Sprintf(`{"serviceId":"bench","formId":"f","formVersion":1,"channel":"web","fields":{"n":%d}}`, n)
				req, _ := http.NewRequest(http.MethodPost, h.URL("request")+"/v1/requests", bytes.NewBufferString(body))
				req.Header.Set("Authorization", "Bearer "+token)
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
			}(n)
		}
		tick.Stop()
		wg.Wait()

		ctx := context.Background()
		db, err := pgxpool.New(ctx, h.DatabaseURL)
		if err != nil {
			b.Fatal(err)
		}
		// Each consumer's own record of being done, per request.
		done := `SELECT r.id::text, greatest(p.started_at, n.sent_at, a.received_at, l.ingested_at),
			p.started_at, n.sent_at, a.received_at, l.ingested_at
			FROM request.request r
			JOIN workflow.process_instance p ON p.request_id = r.id
			JOIN communication.notification n ON n.request_id = r.id AND n.status = 'sent'
			JOIN analytics.inbox_message a ON a.event_id = r.correlation_id
			JOIN datalake_ingestion.lineage l ON l.event_id = r.correlation_id`
		var total []time.Duration
		per := map[string][]time.Duration{}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			rows, err := db.Query(ctx, done)
			if err != nil {
				b.Fatalf("latency query: %v", err)
			}
			total, per = total[:0], map[string][]time.Duration{}
			for rows.Next() {
				var id string
				var all, wf, cm, an, dl time.Time
				if err := rows.Scan(&id, &all, &wf, &cm, &an, &dl); err != nil {
					b.Fatal(err)
				}
				at := sent[id]
				total = append(total, all.Sub(at))
				per["workflow"] = append(per["workflow"], wf.Sub(at))
				per["communication"] = append(per["communication"], cm.Sub(at))
				per["analytics"] = append(per["analytics"], an.Sub(at))
				per["datalake"] = append(per["datalake"], dl.Sub(at))
			}
			rows.Close()
			if len(total) == len(sent) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("after 2 min only %d of %d requests were done by all four consumers", len(total), len(sent))
			}
			time.Sleep(200 * time.Millisecond)
		}
		db.Close()
		b.ReportMetric(float64(len(total)), "requests")
		b.ReportMetric(ms(pct(total, 0.50)), "all4_p50_ms")
		b.ReportMetric(ms(pct(total, 0.99)), "all4_p99_ms")
		for name, d := range per {
			b.ReportMetric(ms(pct(d, 0.50)), name+"_p50_ms")
		}
	}
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
