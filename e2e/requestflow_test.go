package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/parquet-go/parquet-go"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/deploy/observability"
	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
)

// flowRow is how an analyst reads the lake's Parquet files.
type flowRow struct {
	EventID       string    `parquet:"event_id"`
	Type          string    `parquet:"type"`
	OccurredAt    time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	TenantID      string    `parquet:"tenant_id"`
	CorrelationID string    `parquet:"correlation_id"`
	Payload       string    `parquet:"payload"`
	RequestID     string    `parquet:"request_id,optional"`
	ServiceID     string    `parquet:"service_id,optional"`
	Status        string    `parquet:"status,optional"`
}

// flowRequest is one submitted request and what we learn about it.
type flowRequest struct {
	tenant, citizen, citizenToken, id, protocol, email string
	eventID                                            string // request.submitted.v1, found in the lake
}

// TestRequestFlow submits requests for two tenants through the request
// service and follows them through the four consumers of
// request.submitted.v1: workflow (process instance), communication (mail at
// a real SMTP server), analytics (projection) and datalake-ingestion
// (Parquet object + lineage). It checks the idempotency key, that tenant B
// sees nothing of tenant A through any endpoint, and that one trace spans
// the HTTP request, the publish and the four consumers.
func TestRequestFlow(t *testing.T) {
	h := harness.New(t, os.Getenv)
	mailDir, mailEnv := h.MailSink(t)
	bucket, bucketEnv, ownBucket := h.DatalakeBucket("e2e-" + flowRand(6))
	s3 := flowS3(t, h, bucket, ownBucket)
	bucketEnv["DATALAKE_BATCH_AGE"] = "500ms"

	h.Start(t, "request")
	h.Start(t, "workflow", h.SEI(t))
	h.Start(t, "communication", mailEnv)
	h.Start(t, "analytics")
	h.Start(t, "datalake-ingestion", bucketEnv)

	// Every call this test makes to a service, and its answer, is checked
	// against the document the service serves at /openapi.json.
	contract := openapitest.NewTransport(nil)
	for _, svc := range []string{"request", "workflow", "communication", "analytics", "datalake-ingestion"} {
		if err := contract.AddService(context.Background(), h.URL(svc)); err != nil {
			t.Fatalf("the OpenAPI document of %s: %v", svc, err)
		}
	}
	flowClient = &http.Client{Transport: contract}
	t.Cleanup(func() {
		flowClient = http.DefaultClient
		if err := contract.Err(); err != nil {
			t.Errorf("calls that do not match their service's OpenAPI document: %v", err)
		}
	})

	tenantA, tenantB := "org-a-"+flowRand(3), "org-b-"+flowRand(3)
	staffA := h.Token(tenantA, "attendant-a", "attendant", "operator")
	staffB := h.Token(tenantB, "attendant-b", "attendant", "operator")
	newCitizen := func(tenant string) *flowRequest {
		c := "citizen-" + flowRand(3)
		r := &flowRequest{tenant: tenant, citizen: c, citizenToken: h.Token(tenant, c, "citizen"), email: c + "@example.org"}
		// Events carry only the citizen id: the address lives in communication.
		status, body := flowCall(t, http.MethodPut, h.URL("communication")+"/v1/contacts/"+c, r.citizenToken, "",
			`{"email":"`+r.email+`","preferredChannel":"email"}`)
		if status != http.StatusOK {
			t.Fatalf("PUT contact: %d %s", status, body)
		}
		return r
	}
	a1, a2, b1 := newCitizen(tenantA), newCitizen(tenantA), newCitizen(tenantB)

	form := func(service string) string {
		return `{"serviceId":"` + service + `","formId":"form-1","formVersion":1,"channel":"web","fields":{"inscricao":"123"}}`
	}
	submit := func(r *flowRequest, service, key string) {
		status, body := flowCall(t, http.MethodPost, h.URL("request")+"/v1/requests", r.citizenToken, key, form(service))
		if status != http.StatusCreated {
			t.Fatalf("POST /v1/requests: %d %s", status, body)
		}
		var out struct{ ID, Protocol string }
		if err := json.Unmarshal(body, &out); err != nil || out.ID == "" || out.Protocol == "" {
			t.Fatalf("POST /v1/requests body %s: %v", body, err)
		}
		r.id, r.protocol = out.ID, out.Protocol
	}
	keyA1 := "key-" + flowRand(8)
	submit(a1, "iptu-segunda-via", keyA1)
	submit(a2, "alvara-funcionamento", "key-"+flowRand(8))
	submit(b1, "iptu-segunda-via", "key-"+flowRand(8))

	t.Run("idempotency key", func(t *testing.T) {
		status, body := flowCall(t, http.MethodPost, h.URL("request")+"/v1/requests", a1.citizenToken, keyA1, form("iptu-segunda-via"))
		var out struct{ ID string }
		_ = json.Unmarshal(body, &out)
		if status >= 300 || out.ID != a1.id {
			t.Errorf("replay with the same key and body = %d id %q, want 2xx and id %s", status, out.ID, a1.id)
		}
		if status, _ := flowCall(t, http.MethodPost, h.URL("request")+"/v1/requests", a1.citizenToken, keyA1, form("outro-servico")); status != http.StatusConflict {
			t.Errorf("same key with another body = %d, want 409", status)
		}
	})

	all := []*flowRequest{a1, a2, b1}
	staff := map[string]string{tenantA: staffA, tenantB: staffB}

	t.Run("workflow started a process instance", func(t *testing.T) {
		for _, r := range all {
			fabrictest.Eventually(t, 30*time.Second, "process of "+r.id, func() bool {
				status, body := flowCall(t, http.MethodGet, h.URL("workflow")+"/v1/processes?requestId="+r.id, staff[r.tenant], "", "")
				return status == http.StatusOK && flowCount(body) > 0
			})
		}
	})

	t.Run("communication told each citizen of the submission and the move to in_progress, once", func(t *testing.T) {
		for _, r := range all {
			// One notice per event (the submission's confirmation, the move
			// to in_progress), and the two coalesce into one mail when the
			// second comes within NOTICE_COALESCE_WINDOW: then the
			// confirmation is "coalesced" and the status notice, sent,
			// says both. Which of the two happens depends on how fast the
			// workflow moved; either way each fact reaches the citizen
			// once.
			var notices []struct{ Status, Channel, Template string }
			fabrictest.Eventually(t, 30*time.Second, "notifications of "+r.id, func() bool {
				status, body := flowCall(t, http.MethodGet, h.URL("communication")+"/v1/notifications?requestId="+r.id, r.citizenToken, "", "")
				var out struct {
					Items []struct{ Status, Channel, Template string }
				}
				_ = json.Unmarshal(body, &out)
				notices = out.Items
				settled := 0
				for _, n := range out.Items {
					if n.Status == "sent" || n.Status == "coalesced" {
						settled++
					}
				}
				return status == http.StatusOK && len(out.Items) == 2 && settled == 2
			})
			byState := map[string]int{}
			for _, n := range notices {
				byState[n.Status+" "+n.Template]++
			}
			coalesced := byState["coalesced request-confirmation"] == 1 && byState["sent request-received-status"] == 1
			apart := byState["sent request-confirmation"] == 1 && byState["sent request-status"] == 1
			if !coalesced && !apart {
				t.Fatalf("notices of %s = %v, want the confirmation coalesced into a sent request-received-status, or both sent", r.id, byState)
			}
			// Protocol numbers are per tenant: the recipient tells them apart.
			subjects := map[string]int{}
			for _, m := range flowMails(t, mailDir, r.protocol) {
				if !strings.Contains(m, "X-Sink-To: "+r.email+"\r\n") {
					continue
				}
				switch {
				case strings.Contains(m, "Subject: Request received: protocol "+r.protocol+", now in_progress\r\n"):
					subjects["both"]++
				case strings.Contains(m, "Subject: Request received: protocol "+r.protocol+"\r\n"):
					subjects["confirmation"]++
				case strings.Contains(m, "Subject: Request "+r.protocol+" is now in_progress\r\n"):
					subjects["in_progress"]++
				default:
					subjects["other"]++
				}
			}
			want := map[string]int{"confirmation": 1, "in_progress": 1}
			if coalesced {
				want = map[string]int{"both": 1}
			}
			if !maps.Equal(subjects, want) {
				t.Errorf("mails to %s with protocol %s = %v, want %v", r.email, r.protocol, subjects, want)
			}
		}
	})

	t.Run("analytics projected the requests", func(t *testing.T) {
		today := time.Now().UTC().Format("2006-01-02")
		want := map[string]int64{tenantA: 2, tenantB: 1}
		for tenant, n := range want {
			var totals struct {
				Requests  int64
				ByService map[string]int64
			}
			fabrictest.Eventually(t, 30*time.Second, "projection of "+tenant, func() bool {
				status, body := flowCall(t, http.MethodGet, h.URL("analytics")+"/v1/analytics/requests?from="+today+"&to="+today, staff[tenant], "", "")
				var out struct{ Totals json.RawMessage }
				_ = json.Unmarshal(body, &out)
				_ = json.Unmarshal(out.Totals, &totals)
				return status == http.StatusOK && totals.Requests == n
			})
			if tenant == tenantA && (totals.ByService["iptu-segunda-via"] != 1 || totals.ByService["alvara-funcionamento"] != 1) {
				t.Errorf("%s by service = %v, want one of each", tenant, totals.ByService)
			}
		}
	})

	t.Run("datalake wrote Parquet with lineage", func(t *testing.T) {
		for _, r := range all {
			prefix := "tenant=" + r.tenant + "/domain=request/type=request.submitted.v1/"
			var found []flowRow
			var foundKey string
			fabrictest.Eventually(t, 30*time.Second, "lake row of "+r.id, func() bool {
				found, foundKey = nil, ""
				for o := range s3.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
					if o.Err != nil {
						return false
					}
					for _, row := range flowReadParquet(t, s3, bucket, o.Key) {
						if row.RequestID == r.id {
							found, foundKey = append(found, row), o.Key
						}
					}
				}
				return len(found) > 0
			})
			if len(found) != 1 || found[0].TenantID != r.tenant {
				t.Fatalf("lake rows for request %s = %+v, want exactly one of tenant %s (idempotent replay adds none)", r.id, found, r.tenant)
			}
			r.eventID = found[0].EventID
			var l struct {
				ObjectKey string
				RowOffset int
			}
			fabrictest.Eventually(t, 10*time.Second, "lineage of "+r.eventID, func() bool {
				status, body := flowCall(t, http.MethodGet, h.URL("datalake-ingestion")+"/v1/lineage/"+r.eventID, staff[r.tenant], "", "")
				_ = json.Unmarshal(body, &l)
				return status == http.StatusOK
			})
			rows := flowReadParquet(t, s3, bucket, l.ObjectKey)
			if l.ObjectKey != foundKey || l.RowOffset >= len(rows) || rows[l.RowOffset].EventID != r.eventID {
				t.Errorf("lineage of %s points at %s row %d, want the row in %s", r.eventID, l.ObjectKey, l.RowOffset, foundKey)
			}
		}
	})

	t.Run("an attendant claims and approves; the citizen hears, analytics and the lake record it", func(t *testing.T) {
		// The worklist shows a1's open task to tenant A's attendant only.
		var taskID string
		fabrictest.Eventually(t, 30*time.Second, "task of "+a1.id+" in the worklist", func() bool {
			status, body := flowCall(t, http.MethodGet, h.URL("workflow")+"/v1/tasks?status=open", staffA, "", "")
			var out struct {
				Items []struct{ ID, RequestID string }
			}
			_ = json.Unmarshal(body, &out)
			for _, it := range out.Items {
				if it.RequestID == a1.id {
					taskID = it.ID
				}
			}
			return status == http.StatusOK && taskID != ""
		})
		if status, body := flowCall(t, http.MethodGet, h.URL("workflow")+"/v1/tasks?status=open", staffB, "", ""); status != http.StatusOK || strings.Contains(string(body), taskID) {
			t.Errorf("tenant B's worklist = %d and names tenant A's task: %s", status, body)
		}
		if status, body := flowCall(t, http.MethodPost, h.URL("workflow")+"/v1/tasks/"+taskID+"/claim", staffA, "", ""); status != http.StatusOK {
			t.Fatalf("claim = %d %s", status, body)
		}
		if status, body := flowCall(t, http.MethodPost, h.URL("workflow")+"/v1/tasks/"+taskID+"/complete", staffA, "",
			`{"outcome":"approved","reason":"documents in order"}`); status != http.StatusOK {
			t.Fatalf("complete = %d %s", status, body)
		}
		fabrictest.Eventually(t, 30*time.Second, "request "+a1.id+" completed", func() bool {
			status, body := flowCall(t, http.MethodGet, h.URL("request")+"/v1/requests/"+a1.id, a1.citizenToken, "", "")
			var out struct{ Status, StatusReason string }
			_ = json.Unmarshal(body, &out)
			return status == http.StatusOK && out.Status == "completed" && out.StatusReason == "process approved"
		})
		// The approval mail.
		fabrictest.Eventually(t, 30*time.Second, "approval mail to "+a1.email, func() bool {
			for _, m := range flowMails(t, mailDir, decidedSubject(a1.protocol)) {
				if strings.Contains(m, "X-Sink-To: "+a1.email+"\r\n") {
					return true
				}
			}
			return false
		})
		// The citizen's timeline: what they did and what became of it.
		status, body := flowCall(t, http.MethodGet, h.URL("request")+"/v1/requests/"+a1.id+"/timeline", a1.citizenToken, "", "")
		var tl struct{ Entries []struct{ Status string } }
		_ = json.Unmarshal(body, &tl)
		var statuses []string
		for _, e := range tl.Entries {
			statuses = append(statuses, e.Status)
		}
		if status != http.StatusOK || strings.Join(statuses, ",") != "submitted,in_progress,completed" {
			t.Errorf("citizen's timeline = %d %v, want submitted, in_progress, completed", status, statuses)
		}
		// Analytics counts a1 as completed, nothing else of tenant A.
		today := time.Now().UTC().Format("2006-01-02")
		fabrictest.Eventually(t, 30*time.Second, "analytics counts the approval", func() bool {
			status, body := flowCall(t, http.MethodGet, h.URL("analytics")+"/v1/analytics/requests?from="+today+"&to="+today, staffA, "", "")
			var out struct {
				Totals struct{ ByStatus map[string]int64 }
			}
			_ = json.Unmarshal(body, &out)
			return status == http.StatusOK && out.Totals.ByStatus["completed"] == 1
		})
		// The lake has the status change, typed, and the process's approval.
		lake := func(domain, typ string, match func(flowRow) bool) bool {
			prefix := "tenant=" + tenantA + "/domain=" + domain + "/type=" + typ + "/"
			for o := range s3.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
				if o.Err != nil {
					return false
				}
				for _, row := range flowReadParquet(t, s3, bucket, o.Key) {
					if match(row) {
						return true
					}
				}
			}
			return false
		}
		fabrictest.Eventually(t, 30*time.Second, "lake row of the status change to completed", func() bool {
			return lake("request", "request.status-changed.v1", func(r flowRow) bool { return r.RequestID == a1.id && r.Status == "completed" })
		})
		fabrictest.Eventually(t, 30*time.Second, "lake row of the approved process", func() bool {
			return lake("workflow", "workflow.process-completed.v1", func(r flowRow) bool {
				return strings.Contains(r.Payload, a1.id) && strings.Contains(r.Payload, `"outcome":"approved"`)
			})
		})
	})

	t.Run("the approved request is registered in SEI (integration.sei.register.v1)", func(t *testing.T) {
		var reg struct{ Status, SEINumber string }
		fabrictest.Eventually(t, 30*time.Second, "SEI registration of "+a1.id, func() bool {
			status, body := flowCall(t, http.MethodGet, h.URL("workflow")+"/v1/processes?requestId="+a1.id, a1.citizenToken, "", "")
			var out struct {
				Processes []struct {
					SEI *struct {
						Status    string `json:"status"`
						SEINumber string `json:"seiNumber"`
					} `json:"seiRegistration"`
				}
			}
			_ = json.Unmarshal(body, &out)
			if status != http.StatusOK || len(out.Processes) != 1 || out.Processes[0].SEI == nil {
				return false
			}
			reg.Status, reg.SEINumber = out.Processes[0].SEI.Status, out.Processes[0].SEI.SEINumber
			return reg.Status == "registered"
		})
		if reg.SEINumber == "" {
			t.Errorf("registered in SEI without a number: %+v", reg)
		}
	})

	t.Run("an operator exports the day's report (report.export.v1 on platform.work)", func(t *testing.T) {
		today := time.Now().UTC().Format("2006-01-02")
		// The export reads the projection: it must already hold a2's move
		// to in_progress (its status change is consumed on its own queue,
		// racing the steps above), else the file shows it submitted.
		fabrictest.Eventually(t, 30*time.Second, "the projection with a1 completed and a2 in progress", func() bool {
			status, body := flowCall(t, http.MethodGet, h.URL("analytics")+"/v1/analytics/requests?from="+today+"&to="+today, staffA, "", "")
			var out struct {
				Totals struct{ ByStatus map[string]int64 }
			}
			_ = json.Unmarshal(body, &out)
			return status == http.StatusOK && out.Totals.ByStatus["completed"] == 1 && out.Totals.ByStatus["in_progress"] == 1
		})
		status, body := flowCall(t, http.MethodPost, h.URL("analytics")+"/v1/reports/exports", staffA, "",
			`{"from":"`+today+`","to":"`+today+`","format":"csv"}`)
		var export struct{ ID, Status, URL, Error string }
		if err := json.Unmarshal(body, &export); status != http.StatusAccepted || err != nil || export.ID == "" {
			t.Fatalf("POST export = %d %s", status, body)
		}
		path := h.URL("analytics") + "/v1/reports/exports/" + export.ID
		fabrictest.Eventually(t, 60*time.Second, "export "+export.ID+" done", func() bool {
			status, body := flowCall(t, http.MethodGet, path, staffA, "", "")
			_ = json.Unmarshal(body, &export)
			if export.Status == "failed" {
				t.Fatalf("export failed: %s", export.Error)
			}
			return status == http.StatusOK && export.Status == "done" && export.URL != ""
		})
		resp, err := http.Get(export.URL)
		if err != nil {
			t.Fatalf("download %s: %v", export.URL, err)
		}
		csv, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Tenant A's day: a1 completed, a2 in progress; one row per cell.
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(csv), "day,service_id,channel,status,count") ||
			!strings.Contains(string(csv), ",iptu-segunda-via,web,completed,1") || !strings.Contains(string(csv), ",alvara-funcionamento,web,in_progress,1") {
			t.Errorf("export download = %d:\n%s\nwant tenant A's day: iptu completed, alvará in progress", resp.StatusCode, csv)
		}
		if status, _ := flowCall(t, http.MethodGet, path, staffB, "", ""); status != http.StatusNotFound {
			t.Errorf("tenant B GET tenant A's export = %d, want 404", status)
		}
	})

	t.Run("every metric the alert rules and the dashboard query is emitted", func(t *testing.T) {
		used, err := observability.MetricNames(observability.Rules, observability.Dashboard)
		if err != nil {
			t.Fatal(err)
		}
		scraped := map[string]bool{}
		for _, svc := range []string{"request", "workflow", "communication", "analytics", "datalake-ingestion"} {
			if err := observability.Scrape(context.Background(), nil, h.URL(svc)+"/metrics", scraped); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := observability.Check(used, scraped)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Unregistered) > 0 {
			t.Errorf("the rules or the dashboard query metrics nothing emits: %v", rep.Unregistered)
		}
		t.Logf("%d names queried; registered by the fabric, no sample in this run: %v; the broker's or Prometheus's, not scraped here: %v",
			len(used), rep.NoSample, rep.Elsewhere)
	})

	t.Run("tenant B sees nothing of tenant A", func(t *testing.T) {
		// A 404 proves isolation only for something that exists: tenant A
		// must see its own lineage first (its event id comes from the data
		// lake subtest above).
		if a1.eventID == "" {
			t.Fatal("tenant A's event id is unknown (the data lake subtest did not find it): lineage isolation cannot be checked")
		}
		if status, body := flowCall(t, http.MethodGet, h.URL("datalake-ingestion")+"/v1/lineage/"+a1.eventID, staffA, "", ""); status != http.StatusOK {
			t.Fatalf("tenant A GET its own lineage = %d %s, want 200", status, body)
		}
		checks := []struct {
			name, url string
			ok        func(status int, body []byte) bool
		}{
			{"request", h.URL("request") + "/v1/requests/" + a1.id, func(s int, _ []byte) bool { return s == http.StatusNotFound }},
			{"processes", h.URL("workflow") + "/v1/processes?requestId=" + a1.id, func(s int, b []byte) bool {
				return s == http.StatusNotFound || (s == http.StatusOK && flowCount(b) == 0)
			}},
			{"notifications", h.URL("communication") + "/v1/notifications?requestId=" + a1.id, func(s int, b []byte) bool {
				return s == http.StatusOK && flowCount(b) == 0
			}},
			{"contact", h.URL("communication") + "/v1/contacts/" + a1.citizen, func(s int, _ []byte) bool { return s == http.StatusNotFound }},
			{"lineage", h.URL("datalake-ingestion") + "/v1/lineage/" + a1.eventID, func(s int, _ []byte) bool { return s == http.StatusNotFound }},
		}
		for _, c := range checks {
			if status, body := flowCall(t, http.MethodGet, c.url, staffB, "", ""); !c.ok(status, body) {
				t.Errorf("tenant B GET %s = %d %s", c.name, status, body)
			}
		}
		// And tenant A's citizen cannot read another citizen's request.
		if status, _ := flowCall(t, http.MethodGet, h.URL("request")+"/v1/requests/"+a2.id, a1.citizenToken, "", ""); status != http.StatusNotFound && status != http.StatusForbidden {
			t.Errorf("citizen reading another citizen's request = %d, want 404 or 403", status)
		}
	})

	t.Run("one trace from the HTTP request through the four consumers", func(t *testing.T) {
		consumers := []string{"workflow", "communication", "analytics", "datalake-ingestion"}
		var trace []harness.Span
		fabrictest.Eventually(t, 20*time.Second, "spans of event "+a1.eventID, func() bool {
			trace = nil
			var traceID string
			for _, s := range harness.Spans(t, h.TracesDir) {
				if s.Kind == 5 && s.Attributes["messaging.message.id"] == a1.eventID {
					traceID = s.TraceID
					break
				}
			}
			if traceID == "" {
				return false
			}
			trace = harness.Trace(harness.Spans(t, h.TracesDir), traceID)
			got := map[string]bool{}
			for _, s := range trace {
				switch {
				case s.Kind == 2 && s.Service == "request":
					got["http"] = true
				case s.Kind == 4 && s.Service == "request" && strings.Contains(s.Name, "request.submitted.v1"):
					got["publish"] = true
				case s.Kind == 5 && s.Attributes["messaging.message.id"] == a1.eventID:
					got[s.Service] = true
				}
			}
			for _, k := range append([]string{"http", "publish"}, consumers...) {
				if !got[k] {
					return false
				}
			}
			return true
		})
		if len(trace) == 0 {
			t.Fatal("no trace")
		}
	})
}

// decidedSubject is the subject of the notice that a request was decided.
func decidedSubject(protocol string) string {
	return "Subject: Request " + protocol + " is now completed"
}

func flowRand(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// flowClient sends flowCall's requests; TestRequestFlow makes it check
// them against the services' OpenAPI documents.
var flowClient = http.DefaultClient

// flowCall sends a JSON request and returns the status and body.
func flowCall(t *testing.T, method, url, token, idemKey, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := flowClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// flowCount returns the number of items in a list answer: a JSON array, or
// an object with an "items" (or "processes") array.
func flowCount(body []byte) int {
	var arr []json.RawMessage
	if json.Unmarshal(body, &arr) == nil {
		return len(arr)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return 0
	}
	for _, k := range []string{"items", "processes"} {
		if json.Unmarshal(obj[k], &arr) == nil {
			return len(arr)
		}
	}
	return 0
}

func flowMails(t *testing.T, dir, needle string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), needle) {
			out = append(out, string(data))
		}
	}
	return out
}

// flowS3 returns a client of the harness's MinIO and, when the test owns
// bucket, removes it (and its objects) when the test ends.
func flowS3(t *testing.T, h *harness.Harness, bucket string, owned bool) *minio.Client {
	t.Helper()
	c, err := minio.New(h.S3Endpoint, &minio.Options{Creds: credentials.NewStaticV4(h.S3AccessKey, h.S3SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if owned {
		deploytest.DropBucketAtCleanup(t, c, bucket)
	}
	return c
}

func flowReadParquet(t *testing.T, c *minio.Client, bucket, key string) []flowRow {
	t.Helper()
	obj, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	rows, err := parquet.Read[flowRow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("parquet %s: %v", key, err)
	}
	return rows
}
