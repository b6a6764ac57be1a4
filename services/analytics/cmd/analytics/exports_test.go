package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/analytics/internal/export"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// exportView is the reader's view of GET /v1/reports/exports/{id},
// declared here so the test reads the API as a client would.
type exportView struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	From         string     `json:"from"`
	To           string     `json:"to"`
	Format       string     `json:"format"`
	RequestedBy  string     `json:"requestedBy"`
	RowsTotal    *int64     `json:"rowsTotal"`
	RowsWritten  int64      `json:"rowsWritten"`
	Error        string     `json:"error"`
	StartedAt    *time.Time `json:"startedAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
	FinishedAt   *time.Time `json:"finishedAt"`
	URL          string     `json:"url"`
	URLExpiresAt *time.Time `json:"urlExpiresAt"`
}

// requestExport asks for an export and returns where it lives.
func (s *stack) requestExport(t *testing.T, token, body string) (string, exportView) {
	t.Helper()
	r := s.call(t, http.MethodPost, "/v1/reports/exports", token, body)
	if r.Status != http.StatusAccepted {
		t.Fatalf("POST /v1/reports/exports %s = %d %s, want 202", body, r.Status, r.Body)
	}
	var v exportView
	r.JSON(t, &v)
	if loc := r.Header.Get("Location"); loc != "/v1/reports/exports/"+v.ID {
		t.Errorf("Location = %q, want /v1/reports/exports/%s", loc, v.ID)
	}
	if v.Status != "queued" || v.RowsWritten != 0 || v.URL != "" {
		t.Errorf("a new export = %+v, want queued, nothing written, no link", v)
	}
	return "/v1/reports/exports/" + v.ID, v
}

// export reads an export; ok is false unless the answer is 200.
func (s *stack) export(t *testing.T, path, token string) (exportView, int) {
	t.Helper()
	var v exportView
	return v, s.get(t, path, token, &v)
}

// waitStatus polls the export until it reaches status (failing at once on
// another final status) and checks, on the way, that the progress of an
// attempt (its startedAt) never goes back or past the total.
func (s *stack) waitStatus(t *testing.T, path, token, want string, timeout time.Duration) exportView {
	t.Helper()
	var v exportView
	var last int64
	var attempt time.Time
	fabrictest.Eventually(t, timeout, "export "+path+" "+want, func() bool {
		var code int
		if v, code = s.export(t, path, token); code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
		if v.Status == "running" && v.StartedAt != nil {
			if !v.StartedAt.Equal(attempt) {
				attempt, last = *v.StartedAt, 0
			}
			if v.RowsWritten < last || (v.RowsTotal != nil && v.RowsWritten > *v.RowsTotal) {
				t.Errorf("progress went from %d to %d of %v", last, v.RowsWritten, v.RowsTotal)
			}
			last = v.RowsWritten
		}
		if v.Status != want && (v.Status == "done" || v.Status == "failed") {
			t.Fatalf("export %s ended %s (%s), want %s", path, v.Status, v.Error, want)
		}
		return v.Status == want
	})
	return v
}

// download fetches a presigned link with no credentials at all.
func download(t *testing.T, link string) []byte {
	t.Helper()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the download link = %d %s", resp.StatusCode, data)
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") {
		t.Errorf("Content-Disposition = %q, want an attachment", cd)
	}
	return data
}

func readCSV(t *testing.T, data []byte) []projection.Row {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, data)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], []string{"day", "service_id", "channel", "status", "count"}) {
		t.Fatalf("csv header = %v", recs)
	}
	var out []projection.Row
	for _, r := range recs[1:] {
		n, err := strconv.ParseInt(r[4], 10, 64)
		if err != nil {
			t.Fatalf("count %q: %v", r[4], err)
		}
		out = append(out, projection.Row{Day: r[0], ServiceID: r[1], Channel: r[2], Status: r[3], Count: n})
	}
	return out
}

func readParquet(t *testing.T, data []byte) []projection.Row {
	t.Helper()
	// The file's own schema, as any Parquet reader sees it.
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Schema().String(), "int32 day (DATE)") {
		t.Errorf("parquet column day is not a DATE: %s", f.Schema())
	}
	rows, err := parquet.Read[export.FileRow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []projection.Row
	for _, r := range rows {
		out = append(out, projection.Row{Day: export.DayOf(r.Day).Format(projection.DateLayout), ServiceID: r.ServiceID,
			Channel: r.Channel, Status: r.Status, Count: r.Count})
	}
	return out
}

// objectKeys lists the reports bucket under prefix.
func (s *stack) objectKeys(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range s.s3.ListObjects(context.Background(), s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s/%s: %v", s.bucket, prefix, o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// publishJob sends a report.export.v1 job as the relay would.
func (s *stack) publishJob(t *testing.T, tenantID string, payload map[string]any) {
	t.Helper()
	s.publishAs(t, "analytics", "report.export.v1", tenantID, payload)
}

// exec runs SQL on the service's schema as the administrator (bypassing
// row-level security): for states a test cannot reach through the API.
func (s *stack) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (s *stack) jobCounter(t *testing.T, name string) float64 {
	return fabrictest.Counter(t, s.url+"/metrics", name, map[string]string{"consumer": exportQueue})
}

// seedTwoTenants projects requests of org-a and org-b and waits until the
// report shows them all. It returns org-a's rows in March 2026.
func seedTwoTenants(t *testing.T, s *stack) []projection.Row {
	t.Helper()
	d10 := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	a1 := s.submit(t, "org-a", "iptu", "web", d10)
	s.submit(t, "org-a", "iptu", "web", d10)
	s.submit(t, "org-a", "alvara", "app", d10.AddDate(0, 0, 1))
	s.submit(t, "org-a", "iptu", "app", d10.AddDate(0, 0, 10))
	s.submit(t, "org-a", "iptu", "web", time.Date(2026, 4, 2, 9, 0, 0, 0, time.UTC)) // outside March
	s.change(t, "org-a", a1, "completed", d10.Add(time.Hour), nil)
	s.submit(t, "org-b", "b-only", "web", d10)
	s.submit(t, "org-b", "b-only", "app", d10.AddDate(0, 0, 5))

	a := s.token(t, "org-a", auth.RoleAttendant)
	b := s.token(t, "org-b", auth.RoleAttendant)
	var rep projection.Report
	fabrictest.Eventually(t, 20*time.Second, "both tenants projected", func() bool {
		var ra, rb projection.Report
		s.get(t, "/v1/analytics/requests?from=2026-03-01&to=2026-04-30", a, &ra)
		s.get(t, "/v1/analytics/requests?from=2026-03-01&to=2026-04-30", b, &rb)
		return ra.Totals.Requests == 5 && ra.Totals.ByStatus["completed"] == 1 && rb.Totals.Requests == 2
	})
	s.get(t, "/v1/analytics/requests?from=2026-03-01&to=2026-03-31", a, &rep)
	want := []projection.Row{
		{Day: "2026-03-10", ServiceID: "iptu", Channel: "web", Status: "completed", Count: 1},
		{Day: "2026-03-10", ServiceID: "iptu", Channel: "web", Status: "submitted", Count: 1},
		{Day: "2026-03-11", ServiceID: "alvara", Channel: "app", Status: "submitted", Count: 1},
		{Day: "2026-03-20", ServiceID: "iptu", Channel: "app", Status: "submitted", Count: 1},
	}
	if !slices.Equal(rep.Rows, want) {
		t.Fatalf("org-a's March report = %+v, want %+v", rep.Rows, want)
	}
	return want
}

func TestExportsAreWrittenPerTenantAndDownloaded(t *testing.T) {
	// One row per page: progress is recorded after every row.
	s := newStack(t).start(t, map[string]string{"REPORTS_PAGE_ROWS": "1", "REPORTS_URL_TTL": "10m"})
	wantA := seedTwoTenants(t, s)
	attA := s.token(t, "org-a", auth.RoleAttendant)
	opA := s.token(t, "org-a", auth.RoleOperator)
	attB := s.token(t, "org-b", auth.RoleAttendant)

	// CSV, the default format, asked by an attendant of org-a.
	path, created := s.requestExport(t, attA, `{"from":"2026-03-01","to":"2026-03-31"}`)
	if created.Format != "csv" || created.From != "2026-03-01" || created.To != "2026-03-31" {
		t.Errorf("created = %+v, want csv 2026-03-01..2026-03-31", created)
	}
	v := s.waitStatus(t, path, attA, "done", 30*time.Second)
	if v.RowsTotal == nil || *v.RowsTotal != int64(len(wantA)) || v.RowsWritten != *v.RowsTotal {
		t.Errorf("progress of a done export = %d of %v, want %d of %d", v.RowsWritten, v.RowsTotal, len(wantA), len(wantA))
	}
	if v.FinishedAt == nil || v.URL == "" || v.URLExpiresAt == nil {
		t.Fatalf("done export = %+v, want finishedAt and a link", v)
	}
	if left := time.Until(*v.URLExpiresAt); left < 9*time.Minute || left > 11*time.Minute {
		t.Errorf("link expires in %s, want REPORTS_URL_TTL (10m)", left)
	}
	if u, err := url.Parse(v.URL); err != nil || u.Query().Get("X-Amz-Expires") != "600" {
		t.Errorf("link %s is not signed for 600 s", v.URL)
	}
	key := "tenant=org-a/exports/" + v.ID + ".csv"
	if keys := s.objectKeys(t, ""); !slices.Equal(keys, []string{key}) {
		t.Errorf("bucket holds %v, want only %s (org-a's prefix)", keys, key)
	}
	if got := readCSV(t, download(t, v.URL)); !slices.Equal(got, wantA) {
		t.Errorf("downloaded CSV rows = %+v, want %+v", got, wantA)
	}

	// Another tenant cannot see it, whatever its role; a citizen of the
	// same tenant may not either.
	if _, code := s.export(t, path, attB); code != http.StatusNotFound {
		t.Errorf("GET org-a's export as org-b = %d, want 404", code)
	}
	if _, code := s.export(t, path, s.token(t, "org-b", auth.RoleOperator)); code != http.StatusNotFound {
		t.Errorf("GET org-a's export as org-b's operator = %d, want 404", code)
	}
	if _, code := s.export(t, path, s.token(t, "org-a", auth.RoleCitizen)); code != http.StatusForbidden {
		t.Errorf("GET as a citizen = %d, want 403", code)
	}

	// Parquet, asked by an operator, over a range that also takes April.
	pPath, _ := s.requestExport(t, opA, `{"from":"2026-03-01","to":"2026-04-30","format":"parquet"}`)
	pv := s.waitStatus(t, pPath, opA, "done", 30*time.Second)
	wantAprilToo := append(slices.Clone(wantA), projection.Row{Day: "2026-04-02", ServiceID: "iptu", Channel: "web", Status: "submitted", Count: 1})
	if got := readParquet(t, download(t, pv.URL)); !slices.Equal(got, wantAprilToo) {
		t.Errorf("downloaded Parquet rows = %+v, want %+v", got, wantAprilToo)
	}
	if pv.RowsWritten != int64(len(wantAprilToo)) {
		t.Errorf("parquet rowsWritten = %d, want %d", pv.RowsWritten, len(wantAprilToo))
	}

	// org-b's export holds org-b's rows alone, under org-b's prefix.
	bPath, _ := s.requestExport(t, attB, `{"from":"2026-03-01","to":"2026-03-31","format":"csv"}`)
	bv := s.waitStatus(t, bPath, attB, "done", 30*time.Second)
	wantB := []projection.Row{
		{Day: "2026-03-10", ServiceID: "b-only", Channel: "web", Status: "submitted", Count: 1},
		{Day: "2026-03-15", ServiceID: "b-only", Channel: "app", Status: "submitted", Count: 1},
	}
	if got := readCSV(t, download(t, bv.URL)); !slices.Equal(got, wantB) {
		t.Errorf("org-b's rows = %+v, want %+v", got, wantB)
	}
	if keys := s.objectKeys(t, "tenant=org-b/"); !slices.Equal(keys, []string{"tenant=org-b/exports/" + bv.ID + ".csv"}) {
		t.Errorf("org-b's prefix holds %v", keys)
	}
	if _, code := s.export(t, bPath, attA); code != http.StatusNotFound {
		t.Errorf("GET org-b's export as org-a = %d, want 404", code)
	}
}

func TestExportJobsAreIdempotent(t *testing.T) {
	s := newStack(t).start(t, nil)
	want := seedTwoTenants(t, s)
	att := s.token(t, "org-a", auth.RoleAttendant)
	path, created := s.requestExport(t, att, `{"from":"2026-03-01","to":"2026-03-31"}`)
	done := s.waitStatus(t, path, att, "done", 30*time.Second)
	key := "tenant=org-a/exports/" + done.ID + ".csv"
	stat, err := s.s3.StatObject(context.Background(), s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := map[string]any{"reportId": created.ID, "from": "2026-03-01", "to": "2026-03-31", "format": "csv"}
	processed := s.jobCounter(t, "fabric_consumer_processed_total")

	t.Run("a redelivered job of a done export does nothing", func(t *testing.T) {
		s.publishJob(t, "org-a", job)
		fabrictest.WaitCounter(t, 20*time.Second, s.url+"/metrics", "fabric_consumer_processed_total",
			map[string]string{"consumer": exportQueue}, processed+1)
		again, _ := s.export(t, path, att)
		if again.Status != "done" || !again.UpdatedAt.Equal(done.UpdatedAt) || !again.FinishedAt.Equal(*done.FinishedAt) {
			t.Errorf("after a redelivery: %+v, was %+v", again, done)
		}
		st, err := s.s3.StatObject(context.Background(), s.bucket, key, minio.StatObjectOptions{})
		if err != nil || st.ETag != stat.ETag || !st.LastModified.Equal(stat.LastModified) {
			t.Errorf("object rewritten by a redelivery: %+v, was %+v (%v)", st, stat, err)
		}
	})

	t.Run("a running export whose worker died restarts cleanly", func(t *testing.T) {
		// What a worker that died mid-way leaves: running, half written.
		s.exec(t, `UPDATE report_export SET status = 'running', attempt = 1, rows_written = 3, rows_total = 99,
			object_key = NULL, finished_at = NULL WHERE id = $1`, created.ID)
		s.publishJob(t, "org-a", job)
		v := s.waitStatus(t, path, att, "done", 30*time.Second)
		if v.RowsTotal == nil || *v.RowsTotal != int64(len(want)) || v.RowsWritten != int64(len(want)) {
			t.Errorf("restarted export progress = %d of %v, want %d of %d", v.RowsWritten, v.RowsTotal, len(want), len(want))
		}
		if got := readCSV(t, download(t, v.URL)); !slices.Equal(got, want) {
			t.Errorf("restarted export rows = %+v, want %+v", got, want)
		}
	})
}

func TestBadExportJobsAreDeadLettered(t *testing.T) {
	s := newStack(t).start(t, nil)
	att := s.token(t, "org-a", auth.RoleAttendant)

	// A job for an export org-a does not have (org-b's, say).
	s.publishJob(t, "org-a", map[string]any{"reportId": uuid.NewString(), "from": "2026-03-01", "to": "2026-03-31"})
	fabrictest.WaitCounter(t, 20*time.Second, s.url+"/metrics", "fabric_consumer_dead_lettered_total",
		map[string]string{"consumer": exportQueue}, 1)

	// A job the schema admits but the export rules do not (from after to)
	// for a queued export: dead-lettered at once, the export failed.
	id := uuid.NewString()
	s.exec(t, `INSERT INTO report_export (tenant_id, id, requested_by, from_day, to_day, format)
		VALUES ('org-a', $1, 'u-1', '2026-03-01', '2026-03-31', 'csv')`, id)
	s.publishJob(t, "org-a", map[string]any{"reportId": id, "from": "2026-03-31", "to": "2026-03-01"})
	v := s.waitStatus(t, "/v1/reports/exports/"+id, att, "failed", 20*time.Second)
	if !strings.Contains(v.Error, "after") || v.URL != "" {
		t.Errorf("failed export = %+v, want the reason and no link", v)
	}
	fabrictest.WaitCounter(t, 20*time.Second, s.url+"/metrics", "fabric_consumer_dead_lettered_total",
		map[string]string{"consumer": exportQueue}, 2)
	if n := s.jobCounter(t, "fabric_consumer_retried_total"); n != 0 {
		t.Errorf("invalid jobs were retried %g times, want none", n)
	}
	fabrictest.Eventually(t, 30*time.Second, "both letters in the DLQ", func() bool {
		return s.Vhost.Queues(t)[exportQueue+".dlq"].Messages == 2
	})
	if keys := s.objectKeys(t, ""); len(keys) != 0 {
		t.Errorf("bad jobs wrote %v", keys)
	}
}

func TestExportValidation(t *testing.T) {
	s := newStack(t).start(t, nil)
	att := s.token(t, "org-a", auth.RoleAttendant)
	tests := []struct {
		name, body, token string
		want              int
	}{
		{"valid", `{"from":"2026-01-01","to":"2026-01-31"}`, att, 202},
		{"operator may", `{"from":"2026-01-01","to":"2026-01-31","format":"parquet"}`, s.token(t, "org-a", auth.RoleOperator), 202},
		{"from after to", `{"from":"2026-02-01","to":"2026-01-01"}`, att, 422},
		{"no such day", `{"from":"2026-02-30","to":"2026-03-01"}`, att, 422},
		{"missing dates", `{}`, att, 422},
		{"missing to", `{"from":"2026-01-01"}`, att, 422},
		{"range too long", `{"from":"2025-01-01","to":"2026-01-02"}`, att, 422},
		{"a time, not a day", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02"}`, att, 422},
		{"unknown format", `{"from":"2026-01-01","to":"2026-01-02","format":"xlsx"}`, att, 422},
		{"unknown field", `{"from":"2026-01-01","to":"2026-01-02","tenantId":"org-b"}`, att, 400},
		{"not an object", `["2026-01-01","2026-01-02"]`, att, 400},
		{"trailing data", `{"from":"2026-01-01","to":"2026-01-02"} {}`, att, 400},
		{"dates as numbers", `{"from":20260101,"to":20260102}`, att, 400},
		{"no token", `{"from":"2026-01-01","to":"2026-01-31"}`, "", 401},
		{"citizen may not", `{"from":"2026-01-01","to":"2026-01-31"}`, s.token(t, "org-a", auth.RoleCitizen), 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if r := s.call(t, http.MethodPost, "/v1/reports/exports", tc.token, tc.body); r.Status != tc.want {
				t.Errorf("POST %s = %d %s, want %d", tc.body, r.Status, r.Body, tc.want)
			}
		})
	}
	t.Run("no body", func(t *testing.T) {
		if r := s.call(t, http.MethodPost, "/v1/reports/exports", att, ""); r.Status != http.StatusUnsupportedMediaType {
			t.Errorf("POST without a body = %d, want 415", r.Status)
		}
	})
	for _, id := range []string{uuid.NewString(), "not-a-uuid", "urn:uuid:" + uuid.NewString()} {
		t.Run("GET unknown "+id, func(t *testing.T) {
			if _, code := s.export(t, "/v1/reports/exports/"+id, att); code != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", id, code)
			}
		})
	}
}

func TestExportWaitsForTheStore(t *testing.T) {
	// The store is down from the start: the service starts all the same
	// (the bucket is made by the first export that reaches the store).
	s := newStack(t)
	p := fabrictest.StartProxy(t, s.Vars["S3_ENDPOINT"])
	s.start(t, map[string]string{"S3_ENDPOINT": p.Addr, "RETRY_TIERS": "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s"})
	want := seedTwoTenants(t, s)
	att := s.token(t, "org-a", auth.RoleAttendant)
	path, _ := s.requestExport(t, att, `{"from":"2026-03-01","to":"2026-03-31"}`)
	fabrictest.Eventually(t, 20*time.Second, "the failed attempt recorded, the job in a retry tier", func() bool {
		v, _ := s.export(t, path, att)
		return v.Status == "queued" && v.Error != "" && s.jobCounter(t, "fabric_consumer_retried_total") >= 1
	})
	if n := s.jobCounter(t, "fabric_consumer_dead_lettered_total"); n != 0 {
		t.Fatalf("a store outage dead-lettered %g jobs, want a retry", n)
	}
	p.Up()
	v := s.waitStatus(t, path, att, "done", 30*time.Second)
	if v.Error != "" || v.RowsWritten != int64(len(want)) {
		t.Errorf("export after the outage = %+v", v)
	}
	if got := readCSV(t, download(t, v.URL)); !slices.Equal(got, want) {
		t.Errorf("rows = %+v, want %+v", got, want)
	}
}

func TestExportFailsWhenTheStoreStaysDown(t *testing.T) {
	s := newStack(t)
	p := fabrictest.StartProxy(t, s.Vars["S3_ENDPOINT"]) // never up
	s.start(t, map[string]string{"S3_ENDPOINT": p.Addr, "RETRY_TIERS": "200ms"})
	att := s.token(t, "org-a", auth.RoleAttendant)
	path, _ := s.requestExport(t, att, `{"from":"2026-03-01","to":"2026-03-31"}`)
	// One delivery plus one retry, then the DLQ; the export says so.
	v := s.waitStatus(t, path, att, "failed", 30*time.Second)
	if v.Error == "" || v.FinishedAt == nil {
		t.Errorf("failed export = %+v, want the reason and finishedAt", v)
	}
	fabrictest.WaitCounter(t, 20*time.Second, s.url+"/metrics", "fabric_consumer_dead_lettered_total",
		map[string]string{"consumer": exportQueue}, 1)
}
