package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// The service's queues, as the catalog names them.
const (
	requestEventsQueue = "analytics.request-events"
	exportQueue        = "analytics.report-export"
)

// stack is the analytics service's test stack with a reports bucket of its
// own in the real object store; url is the instance start ran.
type stack struct {
	*deploytest.Stack
	url    string
	s3     *minio.Client // the store itself (not through a test's proxy)
	bucket string
}

// newStack provisions the stack and its bucket (removed with everything in
// it when the test ends); start runs the service on it.
func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{Stack: deploytest.NewStack(t, "analytics")}
	s.s3, s.bucket = s.S3(t), s.TempBucket(t, "reports-test-")
	s.Vars["REPORTS_BUCKET"] = s.bucket
	s.Vars["RETRY_TIERS"] = "300ms,300ms,300ms,300ms,300ms"
	return s
}

// start runs the service with extra variables (or overrides), and has api
// check the exchanges with it.
func (s *stack) start(t testing.TB, extra map[string]string) *stack {
	t.Helper()
	s.url = s.Start(t, run, extra).URL
	return s
}

// publish publishes an event of the request service.
func (s *stack) publish(t testing.TB, typ, tenantID string, payload map[string]any) envelope.Envelope {
	t.Helper()
	return s.publishAs(t, "request-service", typ, tenantID, payload)
}

func (s *stack) publishAs(t testing.TB, producer, typ, tenantID string, payload map[string]any) envelope.Envelope {
	t.Helper()
	e, err := envelope.New(typ, tenantID, producer, payload)
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(t, e)
	return e
}

func (s *stack) submit(t *testing.T, tenantID, service, channel string, at time.Time) string {
	t.Helper()
	id := uuid.NewString()
	s.publish(t, "request.submitted.v1", tenantID, map[string]any{
		"requestId": id, "protocol": "AG-" + strings.ToUpper(id[:8]), "serviceId": service, "formId": "f", "formVersion": 1,
		"channel": channel, "citizenId": "c-" + id[9:13], "submittedAt": at.Format(time.RFC3339)})
	return id
}

func (s *stack) change(t *testing.T, tenantID, requestID, status string, at time.Time, extra map[string]any) {
	t.Helper()
	p := map[string]any{"requestId": requestID, "status": status, "changedAt": at.Format(time.RFC3339)}
	for k, v := range extra {
		p[k] = v
	}
	s.publish(t, "request.status-changed.v1", tenantID, p)
}

// call sends method path with an optional JSON body. Every 4xx/5xx must be
// a problem.
func (s *stack) call(t *testing.T, method, path, token, body string) deploytest.Response {
	t.Helper()
	var header map[string]string
	if body != "" {
		header = map[string]string{"Content-Type": "application/json"}
	}
	r := deploytest.Do(t, method, s.url+path, token, body, header)
	if r.Status >= 400 && r.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: status %d with Content-Type %q, want a problem", method, path, r.Status, r.Header.Get("Content-Type"))
	}
	return r
}

// get reads path into out when the answer is 200, and returns the status.
func (s *stack) get(t *testing.T, path, token string, out any) int {
	t.Helper()
	r := s.call(t, http.MethodGet, path, token, "")
	if out != nil && r.Status == http.StatusOK {
		r.JSON(t, out)
	}
	return r.Status
}

// token mints a token of tenantID with roles.
func (s *stack) token(t *testing.T, tenantID string, roles ...string) string {
	t.Helper()
	return s.Token(t, tenantID, "u-1", roles...)
}

func TestProjectionCountsAndMovesStatuses(t *testing.T) {
	s := newStack(t).start(t, nil)
	day1 := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	a1 := s.submit(t, "org-a", "iptu", "web", day1)
	a2 := s.submit(t, "org-a", "iptu", "web", day1)
	s.submit(t, "org-a", "alvara", "app", day2)
	s.submit(t, "org-b", "iptu", "web", day1)
	// Status changes with and without the optional service/channel fields.
	s.change(t, "org-a", a1, "in_progress", day1.Add(time.Hour), map[string]any{"serviceId": "iptu", "channel": "web", "previousStatus": "submitted"})
	s.change(t, "org-a", a1, "completed", day1.Add(2*time.Hour), nil)
	s.change(t, "org-a", a2, "rejected", day1.Add(time.Hour), nil)
	// A stale change (older than the applied one) does not move counts back.
	s.change(t, "org-a", a1, "in_progress", day1.Add(90*time.Minute), nil)
	// A change that overtakes its own submission waits in a retry tier.
	early := uuid.NewString()
	retried := map[string]string{"consumer": "analytics.request-events"}
	before := fabrictest.Counter(t, s.url+"/metrics", "fabric_consumer_retried_total", retried)
	s.change(t, "org-a", early, "in_progress", day2.Add(time.Hour), nil)
	// The submission goes out once the change has been sent to a retry tier.
	fabrictest.WaitCounter(t, 20*time.Second, s.url+"/metrics", "fabric_consumer_retried_total", retried, before+1)
	s.publish(t, "request.submitted.v1", "org-a", map[string]any{"requestId": early, "protocol": "AG-EARLY1",
		"serviceId": "alvara", "formId": "f", "formVersion": 1, "channel": "app", "citizenId": "c-1",
		"submittedAt": day2.Format(time.RFC3339)})

	att := s.token(t, "org-a", auth.RoleAttendant)
	want := map[string]int64{"completed": 1, "rejected": 1, "submitted": 1, "in_progress": 1}
	var rep projection.Report
	fabrictest.Eventually(t, 20*time.Second, "projection of org-a", func() bool {
		rep = projection.Report{}
		if s.get(t, "/v1/analytics/requests?from=2026-03-01&to=2026-03-31", att, &rep) != http.StatusOK {
			return false
		}
		if rep.Totals.Requests != 4 {
			return false
		}
		for k, v := range want {
			if rep.Totals.ByStatus[k] != v {
				return false
			}
		}
		return true
	})
	wantRows := []projection.Row{
		{Day: "2026-03-10", ServiceID: "iptu", Channel: "web", Status: "completed", Count: 1},
		{Day: "2026-03-10", ServiceID: "iptu", Channel: "web", Status: "rejected", Count: 1},
		{Day: "2026-03-11", ServiceID: "alvara", Channel: "app", Status: "in_progress", Count: 1},
		{Day: "2026-03-11", ServiceID: "alvara", Channel: "app", Status: "submitted", Count: 1},
	}
	if len(rep.Rows) != len(wantRows) {
		t.Fatalf("rows = %+v, want %+v", rep.Rows, wantRows)
	}
	for i := range wantRows {
		if rep.Rows[i] != wantRows[i] {
			t.Errorf("row %d = %+v, want %+v", i, rep.Rows[i], wantRows[i])
		}
	}
	var one projection.Report
	if s.get(t, "/v1/analytics/requests?from=2026-03-11&to=2026-03-11", att, &one); one.Totals.Requests != 2 {
		t.Errorf("requests on 2026-03-11 = %d, want 2", one.Totals.Requests)
	}
	var b projection.Report
	if s.get(t, "/v1/analytics/requests?from=2026-03-01&to=2026-03-31", s.token(t, "org-b", auth.RoleOperator), &b); b.Totals.Requests != 1 || b.Totals.ByStatus["submitted"] != 1 {
		t.Errorf("org-b totals = %+v, want 1 submitted (tenant isolation)", b.Totals)
	}
	s.CheckRowSecurity(t, "org-a", map[string]string{"count_tenant": "the tenants whose count deltas to fold, no tenant data"})
}

// TestDuplicateEventCountsOnce: the same event delivered twice is counted
// once. The consumer handles messages concurrently, so each step waits for
// its own signal: the first delivery projected, then the duplicate counted
// as one by the inbox.
func TestDuplicateEventCountsOnce(t *testing.T) {
	s := newStack(t).start(t, nil)
	at := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	att := s.token(t, "org-a", auth.RoleAttendant)
	iptu := func() int64 {
		var rep projection.Report
		s.get(t, "/v1/analytics/requests?from=2026-04-01&to=2026-04-01", att, &rep)
		return rep.Totals.ByService["iptu"]
	}
	e := s.publish(t, "request.submitted.v1", "org-a", map[string]any{"requestId": uuid.NewString(), "protocol": "AG-DUP001",
		"serviceId": "iptu", "formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": at.Format(time.RFC3339)})
	fabrictest.Eventually(t, 20*time.Second, "first delivery projected", func() bool { return iptu() == 1 })
	dupes := map[string]string{"consumer": "analytics.request-events"}
	before := fabrictest.Counter(t, s.url+"/metrics", "fabric_consumer_duplicates_total", dupes)
	s.Publish(t, e)
	fabrictest.WaitCounter(t, 20*time.Second, s.url+"/metrics", "fabric_consumer_duplicates_total", dupes, before+1)
	if n := iptu(); n != 1 {
		t.Errorf("iptu count after a duplicate = %d, want 1", n)
	}
}

func TestQueryValidation(t *testing.T) {
	s := newStack(t).start(t, nil)
	att := s.token(t, "org-a", auth.RoleAttendant)
	tests := []struct {
		name, query, token string
		want               int
	}{
		{"valid range", "from=2026-01-01&to=2026-01-31", att, 200},
		{"from after to", "from=2026-02-01&to=2026-01-01", att, 400},
		{"bad date", "from=2026-02-30&to=2026-03-01", att, 400},
		{"missing dates", "", att, 400},
		{"range too long", "from=2020-01-01&to=2026-01-01", att, 400},
		{"no token", "from=2026-01-01&to=2026-01-31", "", 401},
		{"citizen may not", "from=2026-01-01&to=2026-01-31", s.token(t, "org-a", auth.RoleCitizen), 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.get(t, "/v1/analytics/requests?"+tc.query, tc.token, nil); got != tc.want {
				t.Errorf("GET ?%s = %d, want %d", tc.query, got, tc.want)
			}
		})
	}
}
