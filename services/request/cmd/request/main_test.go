package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// testService is one run() of the service on the shared test stack
// (deploytest.Stack: fresh vhost and schema, the service's own broker user
// and database roles) and the machine's MinIO.
type testService struct {
	*deploytest.Stack
	url    string
	s3     *minio.Client
	bucket string
}

// start runs the service with extra environment and stops it (checking
// that run returns nil) when the test ends.
func start(t testing.TB, extra map[string]string) *testService {
	t.Helper()
	s := &testService{Stack: deploytest.NewStack(t, "request"), bucket: "documents"}
	vars := map[string]string{"MAX_UPLOAD_BYTES": "262144"}
	maps.Copy(vars, extra)
	s.url = s.Start(t, run, vars).URL
	s.s3 = s.S3(t)
	return s
}

func (s *testService) do(t *testing.T, method, path, token string, body io.Reader, header map[string]string) deploytest.Response {
	t.Helper()
	return deploytest.Do(t, method, s.url+path, token, body, header)
}

func (s *testService) submit(t *testing.T, token, body, key string) deploytest.Response {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return s.do(t, http.MethodPost, "/v1/requests", token, strings.NewReader(body), h)
}

type receipt struct {
	ID          string    `json:"id"`
	Protocol    string    `json:"protocol"`
	Status      string    `json:"status"`
	SubmittedAt time.Time `json:"submittedAt"`
}

const validBody = `{"serviceId":"iptu-segunda-via","formId":"form-iptu","formVersion":2,"channel":"web","fields":{"inscricao":"123.456","email":"maria@example.org"}}`

func mustSubmit(t *testing.T, s *testService, token string) receipt {
	t.Helper()
	resp := s.submit(t, token, validBody, "")
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /v1/requests = %d %s, want 201", resp.Status, resp.Body)
	}
	var rc receipt
	resp.JSON(t, &rc)
	return rc
}

// expectProblem is deploytest.ExpectProblem, under the name this
// package's tests have always used.
var expectProblem = deploytest.ExpectProblem

func TestSubmitRejectsMalformedRequests(t *testing.T) {
	s := start(t, nil)
	citizen := s.Token(t, "org-a", "citizen-1", "citizen")
	attendant := s.Token(t, "org-a", "attendant-1", "attendant")
	tests := []struct {
		name        string
		token       string
		contentType string
		key         string
		body        string
		status      int
		field       string // a field the 422 problem must name
	}{
		{name: "no token", contentType: "application/json", body: validBody, status: 401},
		{name: "attendant may not submit", token: attendant, contentType: "application/json", body: validBody, status: 403},
		{name: "not JSON", token: citizen, contentType: "text/plain", body: validBody, status: 415},
		{name: "empty body", token: citizen, contentType: "application/json", body: "", status: 400},
		{name: "malformed JSON", token: citizen, contentType: "application/json", body: `{"serviceId":`, status: 400},
		{name: "unknown field", token: citizen, contentType: "application/json", body: `{"serviceId":"a","tenantId":"org-b"}`, status: 400},
		{name: "trailing data", token: citizen, contentType: "application/json", body: validBody + `{}`, status: 400},
		{name: "wrong type", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":"2","channel":"web","fields":{}}`, status: 400},
		{name: "missing fields", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":1,"channel":"web"}`, status: 422, field: "fields"},
		{name: "bad channel", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":1,"channel":"fax","fields":{}}`, status: 422, field: "channel"},
		{name: "zero form version", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":0,"channel":"web","fields":{}}`, status: 422, field: "formVersion"},
		{name: "bad service id", token: citizen, contentType: "application/json", body: `{"serviceId":"a b/c","formId":"f","formVersion":1,"channel":"web","fields":{}}`, status: 422, field: "serviceId"},
		{name: "too large", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"x":"` + strings.Repeat("x", 300<<10) + `"}}`, status: 413},
		{name: "bad idempotency key", token: citizen, contentType: "application/json", key: "has space", body: validBody, status: 400},
		{name: "NUL in a field value", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"x":"a\u0000b"}}`, status: 400},
		{name: "NUL in a field name", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"a\u0000":"b"}}`, status: 400},
		{name: "invalid UTF-8 in a field", token: citizen, contentType: "application/json", body: "{\"serviceId\":\"a\",\"formId\":\"f\",\"formVersion\":1,\"channel\":\"web\",\"fields\":{\"x\":\"a\xffb\"}}", status: 400},
		{name: "unpaired surrogate in a field", token: citizen, contentType: "application/json", body: `{"serviceId":"a","formId":"f","formVersion":1,"channel":"web","fields":{"x":"\ud800"}}`, status: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": tc.contentType}
			if tc.key != "" {
				h["Idempotency-Key"] = tc.key
			}
			resp := s.do(t, http.MethodPost, "/v1/requests", tc.token, strings.NewReader(tc.body), h)
			expectProblem(t, resp, tc.status)
			if tc.field != "" {
				var p struct{ Errors map[string]string }
				resp.JSON(t, &p)
				if p.Errors[tc.field] == "" {
					t.Errorf("problem errors = %v, want an entry for %s", p.Errors, tc.field)
				}
			}
		})
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM request").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d requests stored after only invalid submissions, want 0", n)
	}
}

var protocolPattern = regexp.MustCompile(`^AGR-\d{4}-\d{6}$`)

func TestSubmitStoresRequestAndPublishesEvent(t *testing.T) {
	// Protocol numbers under concurrency, not the limit: the 42
	// submissions of one tenant below, most at once, exceed the default
	// per-tenant burst.
	s := start(t, map[string]string{"SUBMIT_RATE_PER_TENANT": "0"})
	obs := fabrictest.Observe(t, s.Conn, "request.#")
	citizen := s.Token(t, "org-a", "citizen-1", "citizen")

	resp := s.submit(t, citizen, validBody, "")
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST = %d %s, want 201", resp.Status, resp.Body)
	}
	var rc receipt
	resp.JSON(t, &rc)
	if got := resp.Header.Get("Location"); got != "/v1/requests/"+rc.ID {
		t.Errorf("Location = %q, want /v1/requests/%s", got, rc.ID)
	}
	if !protocolPattern.MatchString(rc.Protocol) || rc.Status != "submitted" || rc.SubmittedAt.IsZero() {
		t.Errorf("receipt = %+v, want AGR-YYYY-NNNNNN, submitted, a time", rc)
	}
	second := mustSubmit(t, s, citizen)
	want := fmt.Sprintf("AGR-%d-%06d", rc.SubmittedAt.Year(), 2)
	if second.Protocol != want {
		t.Errorf("second protocol = %s, want %s (one instance hands out its block in order)", second.Protocol, want)
	}
	// Concurrent submissions of one tenant never share a number, across
	// several reserved blocks.
	var mu sync.Mutex
	seen := map[string]bool{rc.Protocol: true, second.Protocol: true}
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := s.submit(t, citizen, validBody, "")
			if resp.Status != http.StatusCreated {
				t.Errorf("POST /v1/requests = %d %s, want 201", resp.Status, resp.Body)
				return
			}
			var got receipt
			if err := json.Unmarshal(resp.Body, &got); err != nil {
				t.Errorf("receipt: %v", err)
				return
			}
			p := got.Protocol
			mu.Lock()
			defer mu.Unlock()
			if seen[p] {
				t.Errorf("protocol %s handed out twice", p)
			}
			seen[p] = true
		}()
	}
	wg.Wait()
	otherTenant := mustSubmit(t, s, s.Token(t, "org-b", "citizen-9", "citizen"))
	if otherTenant.Protocol != fmt.Sprintf("AGR-%d-%06d", rc.SubmittedAt.Year(), 1) {
		t.Errorf("org-b's first protocol = %s, want its own counter starting at 1", otherTenant.Protocol)
	}

	env := obs.Next(t, "request.submitted.v1", deploytest.AboutRequest("request.submitted.v1", rc.ID))
	if env.TenantID != "org-a" || env.Producer != "request-service" {
		t.Errorf("envelope tenant %q producer %q, want org-a request-service", env.TenantID, env.Producer)
	}
	var p map[string]any
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p["protocol"] != rc.Protocol || p["citizenId"] != "citizen-1" || p["fieldCount"] != float64(2) || p["serviceId"] != "iptu-segunda-via" {
		t.Errorf("payload = %v", p)
	}
	if strings.Contains(string(env.Payload), "maria@example.org") {
		t.Errorf("payload %s carries field contents", env.Payload)
	}
}

func TestGetRequestVisibility(t *testing.T) {
	s := start(t, nil)
	rc := mustSubmit(t, s, s.Token(t, "org-a", "citizen-1", "citizen"))
	tests := []struct {
		name   string
		token  string
		status int
	}{
		{"owner", s.Token(t, "org-a", "citizen-1", "citizen"), 200},
		{"attendant of the tenant", s.Token(t, "org-a", "attendant-1", "attendant"), 200},
		{"operator of the tenant", s.Token(t, "org-a", "operator-1", "operator"), 200},
		{"another citizen of the tenant", s.Token(t, "org-a", "citizen-2", "citizen"), 404},
		{"same subject in another tenant", s.Token(t, "org-b", "citizen-1", "citizen"), 404},
		{"attendant of another tenant", s.Token(t, "org-b", "attendant-1", "attendant"), 404},
		{"no token", "", 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.do(t, http.MethodGet, "/v1/requests/"+rc.ID, tc.token, nil, nil)
			if tc.status != 200 {
				expectProblem(t, resp, tc.status)
				return
			}
			if resp.Status != 200 {
				t.Fatalf("GET = %d %s, want 200", resp.Status, resp.Body)
			}
			var got struct {
				ID, Protocol, Status, CitizenID string
				Fields                          map[string]any
			}
			resp.JSON(t, &got)
			if got.ID != rc.ID || got.Protocol != rc.Protocol || got.Status != "submitted" || got.Fields["inscricao"] != "123.456" {
				t.Errorf("GET = %+v, want %s %s submitted with its fields", got, rc.ID, rc.Protocol)
			}
		})
	}
	t.Run("malformed id", func(t *testing.T) {
		expectProblem(t, s.do(t, http.MethodGet, "/v1/requests/not-a-uuid", s.Token(t, "org-a", "attendant-1", "attendant"), nil, nil), 404)
	})
}

func TestIdempotencyKey(t *testing.T) {
	s := start(t, nil)
	obs := fabrictest.Observe(t, s.Conn, "request.submitted.v1")
	citizen := s.Token(t, "org-a", "citizen-1", "citizen")

	first := s.submit(t, citizen, validBody, "key-1")
	if first.Status != 201 {
		t.Fatalf("first = %d %s", first.Status, first.Body)
	}
	// Same content, other key order and spacing: the same body.
	reordered := `{ "fields": {"email":"maria@example.org","inscricao":"123.456"}, "channel":"web", "formVersion":2, "formId":"form-iptu", "serviceId":"iptu-segunda-via" }`
	again := s.submit(t, citizen, reordered, "key-1")
	if again.Status != 201 || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Location") != first.Header.Get("Location") {
		t.Errorf("replay = %d %s (Location %s), want 201 %s (Location %s)", again.Status, again.Body,
			again.Header.Get("Location"), first.Body, first.Header.Get("Location"))
	}
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay lacks Idempotent-Replayed: true")
	}
	conflict := s.submit(t, citizen, strings.Replace(validBody, `"web"`, `"app"`, 1), "key-1")
	expectProblem(t, conflict, http.StatusConflict)

	// Keys belong to a citizen: another citizen's key-1 is a new request.
	other := s.submit(t, s.Token(t, "org-a", "citizen-2", "citizen"), validBody, "key-1")
	if other.Status != 201 || bytes.Equal(other.Body, first.Body) {
		t.Errorf("other citizen's key-1 = %d %s, want a new 201", other.Status, other.Body)
	}

	// Concurrent first uses of one key: one request, one answer.
	var wg sync.WaitGroup
	bodies := make([][]byte, 5)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.submit(t, citizen, validBody, "key-concurrent")
			if r.Status != 201 {
				t.Errorf("concurrent submit = %d %s", r.Status, r.Body)
			}
			bodies[i] = r.Body
		}()
	}
	wg.Wait()
	for _, b := range bodies[1:] {
		if !bytes.Equal(b, bodies[0]) {
			t.Errorf("concurrent answers differ: %s vs %s", b, bodies[0])
		}
	}

	var rc receipt
	first.JSON(t, &rc)
	obs.Next(t, "the request's submitted event", deploytest.AboutRequest("request.submitted.v1", rc.ID))
	if n := len(obs.Matching(t, deploytest.AboutRequest("request.submitted.v1", rc.ID))); n != 1 {
		t.Errorf("%d request.submitted.v1 events for the replayed request, want 1", n)
	}
	var rows int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM request WHERE tenant_id = 'org-a'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Errorf("%d requests stored, want 3 (key-1, citizen-2's key-1, key-concurrent)", rows)
	}
}

// TestRowLevelSecurity: every table of the service's schema, the fabric's
// included, keeps org-a's rows from any other tenant's session.
func TestRowLevelSecurity(t *testing.T) {
	s := start(t, nil)
	mustSubmit(t, s, s.Token(t, "org-a", "citizen-1", "citizen"))
	s.CheckRowSecurity(t, "org-a", nil)
}

// publish sends a workflow event as the workflow service would.
func (s *testService) publish(t *testing.T, tenant, typ string, payload any) envelope.Envelope {
	t.Helper()
	env, err := envelope.New(typ, tenant, "workflow-service", payload)
	if err != nil {
		t.Fatal(err)
	}
	s.publishEnvelope(t, env)
	return env
}

func (s *testService) publishEnvelope(t *testing.T, env envelope.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Pub.Publish(ctx, env); err != nil {
		t.Fatalf("publish %s: %v", env.Type, err)
	}
}

type requestView struct {
	CorrelationID string `json:"correlationId"`
	Status        string `json:"status"`
	StatusReason  string `json:"statusReason"`
	SLABreached   bool   `json:"slaBreached"`
}

func (s *testService) view(t *testing.T, tenant, id string) requestView {
	t.Helper()
	resp := s.do(t, http.MethodGet, "/v1/requests/"+id, s.Token(t, tenant, "attendant-1", "attendant"), nil, nil)
	if resp.Status != 200 {
		t.Fatalf("GET %s = %d %s", id, resp.Status, resp.Body)
	}
	var v requestView
	resp.JSON(t, &v)
	return v
}

func TestWorkflowEventsKeepStatusCurrent(t *testing.T) {
	s := start(t, nil)
	obs := fabrictest.Observe(t, s.Conn, "request.status-changed.v1")
	tests := []struct {
		outcome string
		want    string
	}{{"approved", "completed"}, {"completed", "completed"}, {"rejected", "rejected"}}
	queued := 0 // workflow events sent to the consumer's queue so far
	alerts := 0 // and to its priority lane (the SLA breaches)
	for _, tc := range tests {
		t.Run(tc.outcome, func(t *testing.T) {
			rc := mustSubmit(t, s, s.Token(t, "org-a", "citizen-1", "citizen"))
			processID := deploytest.NewID(t)
			started := s.publish(t, "org-a", "workflow.process-started.v1",
				map[string]any{"processId": processID, "requestId": rc.ID, "definitionId": "standard-review"})
			fabrictest.Eventually(t, 15*time.Second, "status in_progress", func() bool {
				return s.view(t, "org-a", rc.ID).Status == "in_progress"
			})
			changed := obs.Next(t, "status-changed to in_progress", func(e envelope.Envelope) bool {
				return deploytest.AboutRequest("request.status-changed.v1", rc.ID)(e) && strings.Contains(string(e.Payload), `"in_progress"`)
			})
			if changed.CausationID != started.ID || changed.CorrelationID != started.CorrelationID {
				t.Errorf("status-changed causation %s correlation %s, want %s %s", changed.CausationID, changed.CorrelationID, started.ID, started.CorrelationID)
			}
			var p map[string]any
			_ = json.Unmarshal(changed.Payload, &p)
			if p["previousStatus"] != "submitted" {
				t.Errorf("status-changed payload = %v, want previousStatus submitted", p)
			}
			// A redelivery of the same event is a duplicate for the inbox.
			s.publishEnvelope(t, started)

			s.publish(t, "org-a", "task.sla-breached.v1", map[string]any{"taskId": deploytest.NewID(t), "processId": processID,
				"requestId": rc.ID, "dueAt": time.Now().UTC().Format(time.RFC3339)})
			fabrictest.Eventually(t, 15*time.Second, "SLA breach flagged", func() bool { return s.view(t, "org-a", rc.ID).SLABreached })

			s.publish(t, "org-a", "workflow.process-completed.v1", map[string]any{"processId": processID, "requestId": rc.ID, "outcome": tc.outcome})
			fabrictest.Eventually(t, 15*time.Second, "status "+tc.want, func() bool { return s.view(t, "org-a", rc.ID).Status == tc.want })
			// A late process-started (another event id) must not move it back.
			s.publish(t, "org-a", "workflow.process-started.v1",
				map[string]any{"processId": processID, "requestId": rc.ID, "definitionId": "standard-review"})
			obs.Next(t, "status-changed to "+tc.want, func(e envelope.Envelope) bool {
				return deploytest.AboutRequest("request.status-changed.v1", rc.ID)(e) && strings.Contains(string(e.Payload), `"`+tc.want+`"`)
			})
			// The marker: another request's process-started, behind the
			// late one on the same queue. The consumer runs several handlers
			// at once and can finish the marker first, so the processed
			// counters (acks follow commits) prove all six events were
			// handled (five here, the SLA breach in the priority lane), and the drained outbox puts every status-changed
			// they committed in the observer's queue.
			markerRequest := mustSubmit(t, s, s.Token(t, "org-a", "citizen-1", "citizen"))
			s.publish(t, "org-a", "workflow.process-started.v1",
				map[string]any{"processId": deploytest.NewID(t), "requestId": markerRequest.ID, "definitionId": "standard-review"})
			queued += 5
			alerts++
			fabrictest.Eventually(t, 15*time.Second, "the marker request in_progress", func() bool {
				return s.view(t, "org-a", markerRequest.ID).Status == "in_progress"
			})
			fabrictest.WaitCounter(t, 15*time.Second, s.url+"/metrics", "fabric_consumer_processed_total",
				map[string]string{"consumer": "request.workflow-events"}, float64(queued))
			fabrictest.WaitCounter(t, 15*time.Second, s.url+"/metrics", "fabric_consumer_processed_total",
				map[string]string{"consumer": "request.workflow-events.priority"}, float64(alerts))
			fabrictest.WaitOutboxPublished(t, s.Pool, "request.status-changed.v1", "")
			if got := s.view(t, "org-a", rc.ID).Status; got != tc.want {
				t.Errorf("status after a late process-started = %s, want %s", got, tc.want)
			}
			if n := len(obs.Matching(t, deploytest.AboutRequest("request.status-changed.v1", rc.ID))); n != 2 {
				t.Errorf("%d status-changed events, want 2 (in_progress, %s)", n, tc.want)
			}
		})
	}
}

// TestWorkflowEventOfAnotherTenantIsDeadLettered: tenant B's event naming
// tenant A's request finds no request (RLS + tenant filter) and goes to
// the DLQ, leaving A's request untouched.
func TestWorkflowEventOfAnotherTenantIsDeadLettered(t *testing.T) {
	s := start(t, nil)
	rc := mustSubmit(t, s, s.Token(t, "org-a", "citizen-1", "citizen"))
	s.publish(t, "org-b", "workflow.process-completed.v1", map[string]any{"processId": deploytest.NewID(t), "requestId": rc.ID, "outcome": "rejected"})
	fabrictest.Eventually(t, 15*time.Second, "message in request.workflow-events.dlq", func() bool {
		return s.Vhost.Queues(t)["request.workflow-events.dlq"].Messages == 1
	})
	if got := s.view(t, "org-a", rc.ID).Status; got != "submitted" {
		t.Errorf("org-a's request status = %s after org-b's event, want submitted", got)
	}
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 40, 20))
	for x := range 40 {
		img.Set(x, 10, color.White)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func multipartBody(t *testing.T, field, name string, content []byte) (io.Reader, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	fw, err := w.CreateFormFile(field, name)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &b, w.FormDataContentType()
}

func (s *testService) upload(t *testing.T, token, requestID, field, name string, content []byte) deploytest.Response {
	t.Helper()
	body, ct := multipartBody(t, field, name, content)
	return s.do(t, http.MethodPost, "/v1/requests/"+requestID+"/documents", token, body, map[string]string{"Content-Type": ct})
}

func TestUploadDocument(t *testing.T) {
	s := start(t, nil)
	tenant := deploytest.Unique("org-") // the bucket is shared between test runs; the prefix is not
	obs := fabrictest.Observe(t, s.Conn, "document.uploaded.v1")
	owner := s.Token(t, tenant, "citizen-1", "citizen")
	rc := mustSubmit(t, s, owner)
	img := pngBytes(t)

	resp := s.upload(t, owner, rc.ID, "file", "../../Comprovante de endereço.png", img)
	if resp.Status != http.StatusCreated {
		t.Fatalf("upload = %d %s, want 201", resp.Status, resp.Body)
	}
	var doc struct {
		ID, RequestID, Bucket, ObjectKey, FileName, ContentType, SHA256 string
		Size                                                            int64
	}
	resp.JSON(t, &doc)
	sum := sha256.Sum256(img)
	wantKey := fmt.Sprintf("tenant=%s/requests/%s/documents/%s/Comprovante_de_endere_o.png", tenant, rc.ID, doc.ID)
	if doc.ObjectKey != wantKey || doc.ContentType != "image/png" || doc.Size != int64(len(img)) || doc.SHA256 != hex.EncodeToString(sum[:]) || doc.Bucket != s.bucket {
		t.Errorf("document = %+v, want key %s, image/png, %d bytes, sha256 %x", doc, wantKey, len(img), sum)
	}
	obj, err := s.s3.GetObject(context.Background(), s.bucket, doc.ObjectKey, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s from MinIO: %v", doc.ObjectKey, err)
	}
	if !bytes.Equal(stored, img) {
		t.Errorf("MinIO object has %d bytes, want the %d uploaded", len(stored), len(img))
	}
	env := obs.Next(t, "document.uploaded.v1", func(e envelope.Envelope) bool { return strings.Contains(string(e.Payload), doc.ID) })
	var p map[string]any
	_ = json.Unmarshal(env.Payload, &p)
	if p["objectKey"] != doc.ObjectKey || p["sha256"] != doc.SHA256 || p["size"] != float64(len(img)) || env.TenantID != tenant {
		t.Errorf("document.uploaded.v1 = %s (tenant %s)", env.Payload, env.TenantID)
	}

	tests := []struct {
		name    string
		token   string
		field   string
		content []byte
		status  int
	}{
		{"attendant of the tenant", s.Token(t, tenant, "attendant-1", "attendant"), "file", []byte("%PDF-1.4\n%fake but sniffed as pdf\n"), 201},
		{"plain text", owner, "file", []byte("requerimento em texto\n"), 201},
		{"tiff", owner, "file", append([]byte("II*\x00"), make([]byte, 64)...), 201},
		{"another citizen", s.Token(t, tenant, "citizen-2", "citizen"), "file", img, 404},
		{"attendant of another tenant", s.Token(t, "org-other", "attendant-1", "attendant"), "file", img, 404},
		{"operator may not upload", s.Token(t, tenant, "operator-1", "operator"), "file", img, 403},
		{"unsupported type", owner, "file", []byte("<html><body>hi</body></html>"), 415},
		{"zip", owner, "file", []byte("PK\x03\x04\x14\x00\x00\x00"), 415},
		{"too large", owner, "file", append([]byte("%PDF-1.4\n"), make([]byte, 300<<10)...), 413},
		{"empty file", owner, "file", nil, 400},
		{"no file part", owner, "attachment", img, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.upload(t, tc.token, rc.ID, tc.field, "doc.bin", tc.content)
			if tc.status == 201 {
				if resp.Status != 201 {
					t.Fatalf("upload = %d %s, want 201", resp.Status, resp.Body)
				}
				return
			}
			expectProblem(t, resp, tc.status)
		})
	}
	t.Run("not multipart", func(t *testing.T) {
		resp := s.do(t, http.MethodPost, "/v1/requests/"+rc.ID+"/documents", owner, bytes.NewReader(img), map[string]string{"Content-Type": "image/png"})
		expectProblem(t, resp, 415)
	})

	list := s.do(t, http.MethodGet, "/v1/requests/"+rc.ID+"/documents", owner, nil, nil)
	var docs struct {
		Documents []struct{ ID, ObjectKey string }
	}
	list.JSON(t, &docs)
	if len(docs.Documents) != 4 {
		t.Errorf("GET documents = %s, want 4 documents", list.Body)
	}
	// Refused uploads leave no objects behind.
	var objects int
	for o := range s.s3.ListObjects(context.Background(), s.bucket, minio.ListObjectsOptions{Prefix: "tenant=" + tenant + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		objects++
	}
	if objects != 4 {
		t.Errorf("%d objects under tenant=%s/, want 4", objects, tenant)
	}
	expectProblem(t, s.do(t, http.MethodGet, "/v1/requests/"+rc.ID+"/documents", s.Token(t, "org-other", "attendant-1", "attendant"), nil, nil), 404)
}

// TestUploadRefusesTruncatedMultipart: a body that ends before the file
// does, or before the multipart stream's closing boundary, is refused with
// 400, and nothing of it reaches the bucket, the document table or the
// outbox (the OCR worker would otherwise read a partial object as whole).
func TestUploadRefusesTruncatedMultipart(t *testing.T) {
	s := start(t, nil)
	tenant := deploytest.Unique("org-")
	owner := s.Token(t, tenant, "citizen-1", "citizen")
	rc := mustSubmit(t, s, owner)

	const boundary = "agora-test-boundary"
	file := bytes.Repeat([]byte("linha de texto\n"), 20) // 300 bytes of text/plain
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n" +
		"Content-Type: text/plain\r\n\r\n"
	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"complete", head + string(file) + "\r\n--" + boundary + "--\r\n", 201},
		{"close delimiter without the final CRLF", head + string(file) + "\r\n--" + boundary + "--", 201},
		{"cut mid-file", head + string(file[:150]), 400},
		{"ends with the file, no boundary", head + string(file), 400},
		{"ends with the file and CRLF", head + string(file) + "\r\n", 400},
		{"a delimiter but no closing boundary", head + string(file) + "\r\n--" + boundary + "\r\n", 400},
		{"closing boundary cut", head + string(file) + "\r\n--" + boundary + "-", 400},
		{"another part cut after the file", head + string(file) + "\r\n--" + boundary +
			"\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhalf a no", 400},
	}
	counts := func(t *testing.T) (rows, outbox, objects int) {
		t.Helper()
		ctx := context.Background()
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM document WHERE request_id = $1`, rc.ID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox_event WHERE event_type = 'document.uploaded.v1'
			AND tenant_id = $1`, tenant).Scan(&outbox); err != nil {
			t.Fatal(err)
		}
		for o := range s.s3.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: "tenant=" + tenant + "/", Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			objects++
		}
		return rows, outbox, objects
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows0, outbox0, objects0 := counts(t)
			resp := s.do(t, http.MethodPost, "/v1/requests/"+rc.ID+"/documents", owner, strings.NewReader(tc.body),
				map[string]string{"Content-Type": "multipart/form-data; boundary=" + boundary})
			want := 0
			if tc.status == 201 {
				if resp.Status != 201 {
					t.Fatalf("upload = %d %s, want 201", resp.Status, resp.Body)
				}
				want = 1
			} else {
				expectProblem(t, resp, tc.status)
			}
			rows, outbox, objects := counts(t)
			if rows-rows0 != want || outbox-outbox0 != want || objects-objects0 != want {
				t.Errorf("after the upload: %d new document rows, %d new outbox rows, %d new objects; want %d of each",
					rows-rows0, outbox-outbox0, objects-objects0, want)
			}
		})
	}
}
