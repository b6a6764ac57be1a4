package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/parquet-go/parquet-go"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/messaging"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/seal"
)

// lakeRow is the reader's view of a lake file, declared here so the test
// reads the objects as any parquet-go consumer would.
type lakeRow struct {
	EventID       string    `parquet:"event_id"`
	Type          string    `parquet:"type"`
	OccurredAt    time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	TenantID      string    `parquet:"tenant_id"`
	CorrelationID string    `parquet:"correlation_id"`
	Producer      string    `parquet:"producer"`
	Payload       string    `parquet:"payload"`
	RequestID     string    `parquet:"request_id,optional"`
	Channel       string    `parquet:"channel,optional"`
	Status        string    `parquet:"status,optional"`
	Extensions    string    `parquet:"extensions,optional"`
}

type lineage struct {
	EventID, TenantID, EventType, Bucket, ObjectKey, BatchID, Producer, CorrelationID string
	RowOffset                                                                         int
}

// stack is the data lake on the shared test stack (deploytest.Stack), with
// a bucket of its own, emptied and removed when the test ends.
type stack struct {
	*deploytest.Stack
	url    string
	svc    *fabrictest.Service
	s3     *minio.Client
	bucket string
	// sealKey is the stack's DATALAKE_SEAL_KEY, random, so a test can
	// check what was sealed under it.
	sealKey []byte
}

// newStack provisions the stack; start runs the service on it.
func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{Stack: deploytest.NewStack(t, "datalake-ingestion"), sealKey: make([]byte, seal.KeySize)}
	rand.Read(s.sealKey)
	// Before any instance starts, so the bucket goes after they stopped.
	s.s3, s.bucket = s.S3(t), s.TempBucket(t, "dl-test-")
	return s
}

// start runs the service with small batches and short retry tiers; extra
// are more variables (the outage test puts a proxy before the store).
func (s *stack) start(t testing.TB, extra map[string]string) {
	t.Helper()
	vars := map[string]string{"DATALAKE_BUCKET": s.bucket, "DATALAKE_BATCH_SIZE": "5", "DATALAKE_BATCH_AGE": "300ms",
		"DATALAKE_FLUSH_TIMEOUT": "3s", "RETRY_TIERS": "700ms,700ms,700ms,700ms,700ms,700ms,700ms,700ms",
		"DATALAKE_SEAL_KEY": base64.StdEncoding.EncodeToString(s.sealKey)}
	maps.Copy(vars, extra)
	s.svc = s.Start(t, run, vars)
	s.url = s.svc.URL
}

// startStack is newStack, then start.
func startStack(t testing.TB, extra map[string]string) *stack {
	t.Helper()
	s := newStack(t)
	s.start(t, extra)
	return s
}

func (s *stack) publish(t *testing.T, typ, tenantID string, payload map[string]any) envelope.Envelope {
	t.Helper()
	e, err := envelope.New(typ, tenantID, "request-service", payload)
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(t, e)
	return e
}

func (s *stack) submit(t *testing.T, tenantID string) envelope.Envelope {
	t.Helper()
	return s.publish(t, "request.submitted.v1", tenantID, map[string]any{
		"requestId": uuid.NewString(), "protocol": strings.ToUpper(deploytest.Unique("AG-")), "serviceId": "iptu",
		"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c-1", "submittedAt": time.Now().UTC().Format(time.RFC3339)})
}

func (s *stack) lineage(t *testing.T, token, eventID string) (lineage, int) {
	t.Helper()
	resp := deploytest.Do(t, http.MethodGet, s.url+"/v1/lineage/"+eventID, token, nil, nil)
	var l lineage
	if resp.Status == http.StatusOK {
		resp.JSON(t, &l)
	} else if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("status %d with Content-Type %q, want a problem", resp.Status, ct)
	}
	return l, resp.Status
}

func (s *stack) readObject(t *testing.T, key string) []lakeRow {
	t.Helper()
	data := s.rawObject(t, key)
	rows, err := parquet.Read[lakeRow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("parquet %s: %v", key, err)
	}
	return rows
}

func (s *stack) objects(t *testing.T) []string {
	t.Helper()
	var keys []string
	for o := range s.s3.ListObjects(context.Background(), s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func TestIngestsBatchesAsParquetWithLineage(t *testing.T) {
	s := startStack(t, nil)
	var events []envelope.Envelope
	for range 3 {
		events = append(events, s.submit(t, "org-a"))
	}
	var req struct{ RequestID string }
	_ = json.Unmarshal(events[0].Payload, &req)
	events = append(events, s.publish(t, "request.status-changed.v1", "org-a", map[string]any{
		"requestId": req.RequestID, "status": "in_progress", "changedAt": time.Now().UTC().Format(time.RFC3339)}))
	events = append(events, s.submit(t, "org-b"), s.submit(t, "org-b"))
	// A redelivery of an already published event must not be written twice.
	s.Publish(t, events[1])

	staffA, staffB := s.Token(t, "org-a", "u-1", auth.RoleOperator), s.Token(t, "org-b", "u-1", auth.RoleAttendant)
	tokenOf := map[string]string{"org-a": staffA, "org-b": staffB}
	got := map[string]lineage{}
	fabrictest.Eventually(t, 20*time.Second, "lineage of every event", func() bool {
		for _, e := range events {
			if _, ok := got[e.ID]; ok {
				continue
			}
			if l, code := s.lineage(t, tokenOf[e.TenantID], e.ID); code == http.StatusOK {
				got[e.ID] = l
			}
		}
		return len(got) == len(events)
	})
	date := time.Now().UTC().Format("2006-01-02")
	for _, e := range events {
		l := got[e.ID]
		wantPrefix := "tenant=" + e.TenantID + "/domain=request/type=" + e.Type + "/date=" + e.OccurredAt.Format("2006-01-02") + "/"
		if !strings.HasPrefix(l.ObjectKey, wantPrefix) || !strings.HasSuffix(l.ObjectKey, l.BatchID+".parquet") {
			t.Errorf("lineage of %s: key %q, want under %q named after batch %s", e.ID, l.ObjectKey, wantPrefix, l.BatchID)
		}
		if l.Bucket != s.bucket || l.Producer != "request-service" || l.CorrelationID != e.CorrelationID || l.EventType != e.Type {
			t.Errorf("lineage of %s = %+v", e.ID, l)
		}
		rows := s.readObject(t, l.ObjectKey)
		if l.RowOffset >= len(rows) || rows[l.RowOffset].EventID != e.ID {
			t.Fatalf("row %d of %s is not event %s (%d rows)", l.RowOffset, l.ObjectKey, e.ID, len(rows))
		}
		r := rows[l.RowOffset]
		if r.TenantID != e.TenantID || r.Type != e.Type || !r.OccurredAt.Equal(e.OccurredAt) || r.CorrelationID != e.CorrelationID {
			t.Errorf("row of %s = %+v", e.ID, r)
		}
		var payload map[string]any
		if err := json.Unmarshal([]byte(r.Payload), &payload); err != nil || payload["requestId"] == nil {
			t.Errorf("payload column of %s = %q, want the payload JSON", e.ID, r.Payload)
		}
	}
	total := 0
	for _, k := range s.objects(t) {
		if !strings.Contains(k, "/date="+date+"/") {
			t.Errorf("object %s outside today's partition", k)
		}
		total += len(s.readObject(t, k))
	}
	if total != len(events) {
		t.Errorf("rows in the lake = %d, want %d (one per event, duplicates skipped)", total, len(events))
	}

	tests := []struct {
		name, token, id string
		want            int
	}{
		{"tenant B cannot see tenant A's lineage", staffB, events[0].ID, 404},
		{"unknown event", staffA, uuid.NewString(), 404},
		{"not a UUID", staffA, "abc", 400},
		{"no token", "", events[0].ID, 401},
		{"citizens may not", s.Token(t, "org-a", "u-1", auth.RoleCitizen), events[0].ID, 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, code := s.lineage(t, tc.token, tc.id); code != tc.want {
				t.Errorf("GET lineage = %d, want %d", code, tc.want)
			}
		})
	}
	s.CheckRowSecurity(t, "org-a", nil)
}

// TestKeepsWhatANewerProducerAdded: a producer that has moved ahead of this
// build adds an optional payload field, envelope metadata and a new value
// of an extensible enumeration (all compatible, docs/contract-evolution.md), and during a
// v1→v2 transition publishes both versions. The lake takes every message
// and its Parquet rows keep every byte the producer added.
// A flush killed between writing its file and committing the lineage
// leaves a file no lineage points at; here one is written by hand. The
// sweep removes it once past the grace period, and never a file whose
// lineage committed, nor a key the lake does not write.
func TestOrphanFilesAreSwept(t *testing.T) {
	s := startStack(t, map[string]string{"DATALAKE_ORPHAN_GRACE": "6s", "DATALAKE_ORPHAN_SWEEP": "300ms"})
	ctx := context.Background()
	e := s.submit(t, "org-a")
	tok := s.Token(t, "org-a", "u-1", auth.RoleOperator)
	var committed lineage
	fabrictest.Eventually(t, 20*time.Second, "lineage of the submitted event", func() bool {
		l, code := s.lineage(t, tok, e.ID)
		committed = l
		return code == http.StatusOK
	})
	put := func(key string) {
		t.Helper()
		if _, err := s.s3.PutObject(ctx, s.bucket, key, strings.NewReader("PAR1 left by a killed flush"), -1, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(key string) bool {
		_, err := s.s3.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		return err == nil
	}
	partition := committed.ObjectKey[:strings.LastIndex(committed.ObjectKey, "/")+1]
	orphan, foreign := partition+uuid.NewString()+".parquet", "exports/not-the-lakes.csv"
	put(orphan)
	put(foreign)
	fabrictest.Eventually(t, 30*time.Second, "the orphan file swept", func() bool { return !exists(orphan) })
	// A second orphan, swept by a later pass, which saw the committed file
	// and the foreign key past the grace period too.
	second := partition + uuid.NewString() + ".parquet"
	put(second)
	fabrictest.Eventually(t, 30*time.Second, "the second orphan file swept", func() bool { return !exists(second) })
	if !exists(committed.ObjectKey) {
		t.Errorf("the committed file %s was swept", committed.ObjectKey)
	}
	if !exists(foreign) {
		t.Errorf("%s, not a lake file, was swept", foreign)
	}
}

func TestKeepsWhatANewerProducerAdded(t *testing.T) {
	s := startStack(t, nil)
	v1, err := envelope.New("request.submitted.v1", "org-a", "request-service", json.RawMessage(`{"requestId":"`+uuid.NewString()+
		`","protocol":"AG-NEWER1","serviceId":"iptu","formId":"f","formVersion":1,"channel":"kiosk","citizenId":"c-1",`+
		`"submittedAt":"2026-11-30T10:00:00Z","priority":{"level":"high"}}`))
	if err != nil {
		t.Fatal(err)
	}
	v1.Extensions = map[string]json.RawMessage{"x-origin": json.RawMessage(`{"system":"sei","ids":[1,2]}`)}
	body, err := v1.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Sent as raw bytes: this build's own publisher would refuse them.
	pd, err := s.Pub.Send(context.Background(), broker.Message{Exchange: "platform.events", RoutingKey: v1.Type, Body: body,
		MessageID: v1.ID, CorrelationID: v1.CorrelationID, Type: v1.Type, Headers: map[string]any{"x-tenant-id": "org-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	v2, err := envelope.Alongside(v1, "request.submitted.v2", map[string]any{"requestId": uuid.NewString(), "protocol": "AG-NEWER1",
		"serviceId": "iptu", "form": map[string]any{"id": "f", "version": "1.0.0"}, "fieldCount": 3, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(t, v2)

	staff := s.Token(t, "org-a", "u-1", auth.RoleOperator)
	got := map[string]lineage{}
	fabrictest.Eventually(t, 20*time.Second, "lineage of both versions", func() bool {
		for _, id := range []string{v1.ID, v2.ID} {
			if l, code := s.lineage(t, staff, id); code == http.StatusOK {
				got[id] = l
			}
		}
		return len(got) == 2
	})
	rowOf := func(id string) lakeRow {
		l := got[id]
		rows := s.readObject(t, l.ObjectKey)
		if l.RowOffset >= len(rows) || rows[l.RowOffset].EventID != id {
			t.Fatalf("row %d of %s is not event %s", l.RowOffset, l.ObjectKey, id)
		}
		return rows[l.RowOffset]
	}
	r1 := rowOf(v1.ID)
	if !strings.Contains(r1.Payload, `"priority":{"level":"high"}`) {
		t.Errorf("payload column lost the added field: %s", r1.Payload)
	}
	if r1.Extensions != `{"x-origin":{"system":"sei","ids":[1,2]}}` {
		t.Errorf("extensions column = %q, want the envelope metadata the producer added", r1.Extensions)
	}
	if r1.Channel != "kiosk" {
		t.Errorf("channel column = %q, want the new value kiosk", r1.Channel)
	}
	if r2 := rowOf(v2.ID); r2.Type != "request.submitted.v2" || !strings.Contains(got[v2.ID].ObjectKey, "/type=request.submitted.v2/") ||
		r2.CorrelationID != v1.CorrelationID {
		t.Errorf("v2 row = %+v at %s, want its own partition and v1's correlation", r2, got[v2.ID].ObjectKey)
	}
}

// TestOverlappingBatchesWriteEachEventOnce: a redelivered event can sit in
// a second batch while its first delivery's batch is still being written.
// Two such batches flush at the same time, then a third repeats events of
// both: every event is in the lake exactly once (Parquet rows = lineage
// rows = events), whichever batch got it.
func TestOverlappingBatchesWriteEachEventOnce(t *testing.T) {
	s := startStack(t, nil)
	ctx := context.Background()
	objects, err := objstore.New(objstore.Config{Endpoint: s.Vars["S3_ENDPOINT"], AccessKey: s.Vars["S3_ACCESS_KEY"],
		SecretKey: s.Vars["S3_SECRET_KEY"]})
	if err != nil {
		t.Fatal(err)
	}
	restrictions, err := restrictionsOf(s.sealKey)
	if err != nil {
		t.Fatal(err)
	}
	w := messaging.NewWriter(objects, s.bucket, postgres.New(s.Pool), restrictions, slog.New(slog.DiscardHandler))
	var events []envelope.Envelope
	for i := range 6 {
		e, err := envelope.New("request.submitted.v1", []string{"org-a", "org-b"}[i%2], "request-service", map[string]any{
			"requestId": uuid.NewString(), "protocol": "AG-OVERLAP" + strconv.Itoa(i), "serviceId": "iptu", "formId": "f",
			"formVersion": 1, "channel": "web", "citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	for round := range 5 {
		batches := [][]envelope.Envelope{events[0:4], events[2:6], {events[5], events[0], events[3]}}
		errs := make(chan error, len(batches))
		for _, b := range batches {
			go func() { errs <- w.Flush(ctx, b) }()
		}
		for range batches {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: flush: %v", round, err)
			}
		}
	}
	rowsOf := map[string]int{}
	for _, k := range s.objects(t) {
		for _, r := range s.readObject(t, k) {
			rowsOf[r.EventID]++
		}
	}
	var lineageRows int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM lineage WHERE object_key <> '' AND row_offset >= 0`).Scan(&lineageRows); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if rowsOf[e.ID] != 1 {
			t.Errorf("event %s is in %d Parquet rows, want exactly 1", e.ID, rowsOf[e.ID])
		}
	}
	if len(rowsOf) != len(events) || lineageRows != len(events) {
		t.Errorf("lake holds %d events, lineage %d rows; want %d and %d", len(rowsOf), lineageRows, len(events), len(events))
	}
}

func TestStoreOutageMessagesWaitAndIngestionResumes(t *testing.T) {
	s := newStack(t)
	p := fabrictest.StartProxy(t, s.Vars["S3_ENDPOINT"])
	// A one-second hold plays the deployment's ten minutes (the pauses
	// scale with it): the store stays down past one hold, as a ten-minute
	// outage would with the default.
	s.start(t, map[string]string{"S3_ENDPOINT": p.Addr, "OUTAGE_HOLD": "1s"})
	metrics := s.url + "/metrics"
	var events []envelope.Envelope
	for range 5 {
		events = append(events, s.submit(t, "org-a"))
	}
	fabrictest.WaitCounter(t, 20*time.Second, metrics, "fabric_consumer_outage_waits_total", nil, 1)
	down := time.Now()
	staff := s.Token(t, "org-a", "u-1", auth.RoleOperator)
	if _, code := s.lineage(t, staff, events[0].ID); code != http.StatusNotFound {
		t.Fatalf("lineage while the store is down = %d, want 404", code)
	}
	fabrictest.Eventually(t, 20*time.Second, "the outage past one hold", func() bool { return time.Since(down) >= 1100*time.Millisecond })
	p.Up()
	for _, e := range events {
		var l lineage
		fabrictest.Eventually(t, 20*time.Second, "ingestion of "+e.ID+" after the store came back", func() bool {
			var code int
			l, code = s.lineage(t, staff, e.ID)
			return code == http.StatusOK
		})
		var found int
		for _, r := range s.readObject(t, l.ObjectKey) {
			if r.EventID == e.ID {
				found++
			}
		}
		if found != 1 {
			t.Errorf("object %s holds event %s %d times, want once", l.ObjectKey, e.ID, found)
		}
	}
	if n := fabrictest.Counter(t, metrics, "fabric_consumer_dead_lettered_total", nil); n != 0 {
		t.Errorf("%v messages dead-lettered during the outage, want none", n)
	}
	if n := fabrictest.Counter(t, metrics, "fabric_consumer_retried_total", nil); n != 0 {
		t.Errorf("%v retries scheduled during the outage, want none: an outage is waited out", n)
	}
}
