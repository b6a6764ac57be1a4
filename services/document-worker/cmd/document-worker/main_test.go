package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/document-worker/doctest"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

// stack is the document worker on the shared test stack
// (deploytest.Stack), with the documents bucket, the request service's part
// (uploads) and observers of what the worker emits.
type stack struct {
	*deploytest.Stack
	t       testing.TB
	objects interface {
		EnsureBucket(ctx context.Context, bucket string) error
		Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) error
		Get(ctx context.Context, bucket, key string) ([]byte, error)
	}
	bucket string
	// events sees document.processed.v1 and document.validated.v1, in
	// arrival order, and commands ai.knowledge.index.v1, once the first
	// instance has declared the exchanges.
	events, commands interface {
		Matching(testing.TB, func(envelope.Envelope) bool) []envelope.Envelope
	}
}

func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{Stack: deploytest.NewStack(t, "document-worker"), t: t, bucket: "documents"}
	var err error
	if s.objects, err = objstore.New(objstore.Config{Endpoint: s.Vars["S3_ENDPOINT"], AccessKey: s.Vars["S3_ACCESS_KEY"], SecretKey: s.Vars["S3_SECRET_KEY"]}); err != nil {
		t.Fatal(err)
	}
	// The request service makes the bucket; here the test does (an
	// instance may be started with the store out of reach).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.objects.EnsureBucket(ctx, s.bucket); err != nil {
		t.Fatalf("minio (run `make infra`): %v", err)
	}
	return s
}

// find returns the envelopes of typ whose payload names documentID.
func (s *stack) find(typ, documentID string) []envelope.Envelope {
	s.t.Helper()
	o := s.events
	if typ == "ai.knowledge.index.v1" {
		o = s.commands
	}
	return o.Matching(s.t, func(e envelope.Envelope) bool {
		var p struct {
			DocumentID string `json:"documentId"`
		}
		return e.Type == typ && json.Unmarshal(e.Payload, &p) == nil && p.DocumentID == documentID
	})
}

// arrivedBefore reports whether event a arrived before event b (both
// received).
func (s *stack) arrivedBefore(a, b envelope.Envelope) bool {
	s.t.Helper()
	both := s.events.Matching(s.t, func(e envelope.Envelope) bool { return e.ID == a.ID || e.ID == b.ID })
	return len(both) == 2 && both[0].ID == a.ID
}

// validated is the payload of a document.validated.v1.
type validated struct {
	DocumentID string `json:"documentId"`
	RequestID  string `json:"requestId"`
	Valid      bool   `json:"valid"`
	Kind       string `json:"kind"`
	Checks     []struct {
		Name   string `json:"name"`
		Passed bool   `json:"passed"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Reason string `json:"reason"`
}

// verdict waits for the document.validated.v1 of documentID and checks it
// against its document.processed.v1: derived from the same trigger, and
// published after it.
func (s *stack) verdict(t testing.TB, documentID string) validated {
	t.Helper()
	fabrictest.Eventually(t, 90*time.Second, "document.validated.v1 of "+documentID, func() bool {
		return len(s.find("document.validated.v1", documentID)) > 0 && len(s.find("document.processed.v1", documentID)) > 0
	})
	processed, e := s.find("document.processed.v1", documentID)[0], s.find("document.validated.v1", documentID)[0]
	if e.CausationID != processed.CausationID || e.CorrelationID != processed.CorrelationID || e.TenantID != processed.TenantID {
		t.Errorf("validated causation/correlation/tenant %s/%s/%s, want the processed event's %s/%s/%s", e.CausationID,
			e.CorrelationID, e.TenantID, processed.CausationID, processed.CorrelationID, processed.TenantID)
	}
	if !s.arrivedBefore(processed, e) {
		t.Errorf("document.validated.v1 of %s arrived before its document.processed.v1", documentID)
	}
	var v validated
	if err := json.Unmarshal(e.Payload, &v); err != nil {
		t.Fatal(err)
	}
	if v.DocumentID != documentID || v.RequestID == "" || len(v.Checks) == 0 {
		t.Errorf("validated = %+v, want document %s, its request and the checks", v, documentID)
	}
	return v
}

// worker is one running instance of the service.
type worker struct {
	*fabrictest.Service
}

// count returns how many of the worker's log lines carry msg.
func (w worker) count(msg string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(w.Logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			n++
		}
	}
	return n
}

// start runs an instance with one handler and short retry tiers, plus
// extra; it stops (and run must return nil) at cleanup.
func (s *stack) start(extra map[string]string) *worker {
	s.t.Helper()
	vars := map[string]string{"WORKER_CONCURRENCY": "1", "RETRY_TIERS": "300ms,300ms"}
	maps.Copy(vars, extra)
	w := &worker{s.Start(s.t, run, vars)}
	if s.events == nil {
		s.events = fabrictest.Observe(s.t, s.Conn, "document.processed.v1", "document.validated.v1")
		s.commands = fabrictest.ObserveExchange(s.t, s.Conn, topology.CommandsExchange, "ai.knowledge.index.v1")
	}
	return w
}

type upload struct {
	tenant, contentType, name string
	data                      []byte
	// keyTenant, when set, stores the object under another tenant's prefix.
	keyTenant string
	// sha overrides the announced checksum.
	sha string
}

// upload stores the file as the request service would and publishes its
// document.uploaded.v1; it returns the document id.
func (s *stack) upload(u upload) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	docID, reqID := uuid.NewString(), uuid.NewString()
	keyTenant := u.tenant
	if u.keyTenant != "" {
		keyTenant = u.keyTenant
	}
	key := fmt.Sprintf("tenant=%s/requests/%s/documents/%s/%s", keyTenant, reqID, docID, u.name)
	if err := s.objects.Put(ctx, s.bucket, key, bytes.NewReader(u.data), int64(len(u.data)), u.contentType); err != nil {
		s.t.Fatalf("put %s: %v", key, err)
	}
	sum := sha256.Sum256(u.data)
	sha := hex.EncodeToString(sum[:])
	if u.sha != "" {
		sha = u.sha
	}
	e, err := envelope.New("document.uploaded.v1", u.tenant, "request-service", map[string]any{
		"documentId": docID, "requestId": reqID, "bucket": s.bucket, "objectKey": key, "fileName": u.name,
		"contentType": u.contentType, "size": len(u.data), "sha256": sha,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.Publish(s.t, e)
	return docID
}

func (s *stack) text(tenantID, documentID string) string {
	s.t.Helper()
	b, err := s.objects.Get(context.Background(), s.bucket, document.TextKey(tenantID, documentID))
	if err != nil {
		s.t.Fatalf("text of %s: %v", documentID, err)
	}
	return string(b)
}

// deadLetter is a message found in the DLQ with the fabric's headers.
type deadLetter struct {
	documentID, reason, class, err string
	attempts                       int
}

// deadLetters reads (and requeues) what is in document.processing.dlq.
func (s *stack) deadLetters() []deadLetter { return s.deadLettersIn("document.processing.dlq") }

// deadLettersIn reads (and requeues) what is in dlq.
func (s *stack) deadLettersIn(dlq string) []deadLetter {
	s.t.Helper()
	ch, err := s.Conn.Channel(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	defer ch.Close()
	var out []deadLetter
	var last uint64
	for {
		d, ok, err := ch.Get(dlq, false)
		if err != nil {
			s.t.Fatalf("get dlq: %v", err)
		}
		if !ok {
			break
		}
		last = d.DeliveryTag
		e, _ := envelope.Decode(d.Body, 0)
		var p struct {
			DocumentID string `json:"documentId"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		str := func(k string) string { v, _ := d.Headers[k].(string); return v }
		// The attempt count is an AMQP integer: its width is the encoder's.
		attempts := 0
		switch v := d.Headers["x-fabric-attempts"].(type) {
		case int32:
			attempts = int(v)
		case int64:
			attempts = int(v)
		}
		out = append(out, deadLetter{documentID: p.DocumentID, reason: str("x-fabric-reason"),
			class: str("x-fabric-error-class"), err: str("x-fabric-error"), attempts: attempts})
	}
	if last > 0 {
		_ = ch.Nack(last, true, true)
	}
	return out
}

func (s *stack) waitDeadLetter(documentID string, timeout time.Duration) deadLetter {
	return s.waitDeadLetterIn("document.processing.dlq", documentID, timeout)
}

func (s *stack) waitDeadLetterIn(dlq, documentID string, timeout time.Duration) deadLetter {
	s.t.Helper()
	var found deadLetter
	fabrictest.Eventually(s.t, timeout, "dead letter of "+documentID+" in "+dlq, func() bool {
		for _, d := range s.deadLettersIn(dlq) {
			if d.documentID == documentID {
				found = d
				return true
			}
		}
		return false
	})
	return found
}

// mustDoc returns a function that fails t when a fixture cannot be made.
func mustDoc(t testing.TB) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestDocumentWorkerExtractsTextWithCompetingInstances(t *testing.T) {
	s := newStack(t)
	w1, w2 := s.start(nil), s.start(nil)
	tenantID := deploytest.Unique("org-a-")
	want := strings.Join(doctest.Lines, "\n")
	pngData := mustDoc(t)(doctest.PNG(doctest.Lines, 36))
	cases := []struct {
		name, contentType, file string
		data                    []byte
		method                  string
		minAccuracy             float64
		// kind is the verdict's kind ("" when the reading is too poor
		// to say): the fixtures' text is a "certidão de residência".
		kind string
	}{
		{"png through tesseract", "image/png", "certidao.png", pngData, "tesseract", 0.9, "proof-of-address"},
		{"pdf with a text layer", "application/pdf", "certidao.pdf", mustDoc(t)(doctest.TextPDF(doctest.Lines)), "pdftotext", 0.99, "proof-of-address"},
		{"scanned pdf", "application/pdf", "digitalizado.pdf", mustDoc(t)(doctest.ScannedPDF(pngData)), "pdftoppm+tesseract", 0.9, "proof-of-address"},
		{"plain text", "text/plain; charset=utf-8", "nota.txt", []byte(want), "plain", 1, "proof-of-address"},
		{"second png", "image/png", "certidao-2.png", pngData, "tesseract", 0.9, "proof-of-address"},
		{"third png", "image/png", "certidao-3.png", pngData, "tesseract", 0.9, "proof-of-address"},
		// A poor scan: 18 px glyphs and 2 % salt-and-pepper noise.
		{"degraded png", "image/png", "ruim.png", mustDoc(t)(doctest.Degraded(doctest.Lines, 0.02, 7)), "tesseract", 0.5, ""},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = s.upload(upload{tenant: tenantID, contentType: c.contentType, name: c.file, data: c.data})
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fabrictest.Eventually(t, 90*time.Second, "document.processed.v1 and ai.knowledge.index.v1", func() bool {
				return len(s.find("document.processed.v1", ids[i])) > 0 && len(s.find("ai.knowledge.index.v1", ids[i])) > 0
			})
			processed := s.find("document.processed.v1", ids[i])[0]
			var p struct {
				TextObjectKey string `json:"textObjectKey"`
				Pages         int    `json:"pages"`
				Characters    int    `json:"characters"`
				Language      string `json:"language"`
				Method        string `json:"method"`
			}
			if err := json.Unmarshal(processed.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Method != c.method || p.Pages != 1 || p.Language != "por" || p.Characters == 0 {
				t.Errorf("processed = %+v, want method %s, 1 page, language por, characters > 0", p, c.method)
			}
			if p.TextObjectKey != "tenant="+tenantID+"/documents/"+ids[i]+"/text.txt" {
				t.Errorf("textObjectKey = %q, want the tenant's documents prefix", p.TextObjectKey)
			}
			if processed.TenantID != tenantID || processed.CausationID == "" {
				t.Errorf("processed envelope tenant %q causation %q, want %s and the upload's id", processed.TenantID, processed.CausationID, tenantID)
			}
			cmd := s.find("ai.knowledge.index.v1", ids[i])[0]
			if cmd.CausationID != processed.CausationID || cmd.CorrelationID != processed.CorrelationID {
				t.Errorf("index command causation/correlation %s/%s, want %s/%s", cmd.CausationID, cmd.CorrelationID, processed.CausationID, processed.CorrelationID)
			}
			acc := doctest.WordAccuracy(want, s.text(tenantID, ids[i]))
			t.Logf("%s: word accuracy %.3f (%d words)", c.name, acc, len(doctest.Words(want)))
			if acc < c.minAccuracy {
				t.Errorf("word accuracy %.3f, want ≥ %.2f; text:\n%s", acc, c.minAccuracy, s.text(tenantID, ids[i]))
			}
			var method string
			var pages int
			if err := s.Pool.QueryRow(context.Background(), fmt.Sprintf(
				"SELECT method, pages FROM %s.document_text WHERE tenant_id = $1 AND document_id = $2", s.Schema),
				tenantID, ids[i]).Scan(&method, &pages); err != nil {
				t.Fatalf("document row: %v", err)
			}
			if method != c.method {
				t.Errorf("row method = %q, want %q", method, c.method)
			}
			v := s.verdict(t, ids[i])
			if !v.Valid || v.Reason != "" || (c.kind != "" && v.Kind != c.kind) {
				t.Errorf("validated = %+v, want valid, no reason, kind %q", v, cmp.Or(c.kind, "any"))
			}
		})
	}
	t.Run("each document processed exactly once, by both instances", func(t *testing.T) {
		for i, id := range ids {
			if n, m := len(s.find("document.processed.v1", id)), len(s.find("document.validated.v1", id)); n != 1 || m != 1 {
				t.Errorf("%s: %d processed and %d validated events, want 1 and 1", cases[i].name, n, m)
			}
		}
		n1, n2 := w1.count("document processed"), w2.count("document processed")
		t.Logf("instance 1 processed %d, instance 2 processed %d", n1, n2)
		if n1+n2 != len(ids) || n1 == 0 || n2 == 0 {
			t.Errorf("instances processed %d and %d documents, want %d in total shared by both", n1, n2, len(ids))
		}
	})
	s.CheckRowSecurity(t, tenantID, nil)
}

// TestDocumentWorkerJudgesDocuments: after the text, the worker's verdict
// (document.validated.v1): readable or not, and the kind of document its
// keywords suggest. An unreadable document is still processed (its text,
// if any, stored and indexed): the verdict says it is not valid, and why.
func TestDocumentWorkerJudgesDocuments(t *testing.T) {
	s := newStack(t)
	s.start(map[string]string{"DOCUMENT_MIN_LETTERS": "20"})
	tenantID := deploytest.Unique("org-a-")
	cases := []struct {
		name, contentType, file string
		data                    []byte
		valid                   bool
		kind                    string
	}{
		{"identity card through tesseract", "image/png", "rg.png", mustDoc(t)(doctest.PNG([]string{
			"REPÚBLICA FEDERATIVA DO BRASIL",
			"CARTEIRA DE IDENTIDADE",
			"RG 12.345.678-9   CPF 123.456.789-00",
			"Nome: Maria da Silva Santos",
		}, 36)), true, "identity"},
		{"payslip as text", "text/plain", "holerite.txt", []byte("HOLERITE - demonstrativo de pagamento\nSalário base: R$ 3.000,00"), true, "proof-of-income"},
		{"blank scan", "image/png", "branco.png", mustDoc(t)(doctest.PNG([]string{" "}, 36)), false, "unknown"},
		{"a few characters", "text/plain", "nota.txt", []byte("ok 12 / 3"), false, "unknown"},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = s.upload(upload{tenant: tenantID, contentType: c.contentType, name: c.file, data: c.data})
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := s.verdict(t, ids[i])
			if v.Valid != c.valid || v.Kind != c.kind {
				t.Errorf("validated = %+v, want valid %v kind %s; text:\n%s", v, c.valid, c.kind, s.text(tenantID, ids[i]))
			}
			if c.valid != (v.Reason == "") || (!c.valid && !strings.Contains(v.Reason, "unreadable")) {
				t.Errorf("reason %q, want one saying unreadable exactly when the document is not valid", v.Reason)
			}
			if len(v.Checks) != 2 || v.Checks[0].Name != "readable" || v.Checks[0].Passed != c.valid || v.Checks[1].Name != "kind" {
				t.Errorf("checks = %+v, want readable (passed %v), then kind", v.Checks, c.valid)
			}
			fabrictest.Eventually(t, 30*time.Second, "ai.knowledge.index.v1", func() bool {
				return len(s.find("ai.knowledge.index.v1", ids[i])) > 0
			})
		})
	}
}

func TestDocumentWorkerDeadLettersBadFiles(t *testing.T) {
	s := newStack(t)
	s.start(nil)
	tenantID := deploytest.Unique("org-a-")
	pngData := mustDoc(t)(doctest.PNG([]string{"Documento de teste"}, 36))
	cases := []struct {
		name  string
		up    upload
		error string
	}{
		{"truncated png", upload{contentType: "image/png", name: "x.png", data: pngData[:len(pngData)/3]}, "corrupt file"},
		{"garbage declared as pdf", upload{contentType: "application/pdf", name: "x.pdf", data: []byte("not a pdf at all")}, "corrupt file"},
		{"broken pdf body", upload{contentType: "application/pdf", name: "x.pdf", data: []byte("%PDF-1.4\n%garbage without objects\n")}, "corrupt file"},
		{"unsupported type", upload{contentType: "application/zip", name: "x.zip", data: []byte("PK\x03\x04zip")}, "unsupported content type"},
		{"object of another tenant", upload{contentType: "image/png", name: "x.png", data: pngData, keyTenant: deploytest.Unique("org-b-")}, "object outside the tenant's prefix"},
		{"checksum mismatch", upload{contentType: "image/png", name: "x.png", data: pngData, sha: strings.Repeat("ab", 32)}, "sha256 mismatch"},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		c.up.tenant = tenantID
		ids[i] = s.upload(c.up)
	}
	good := s.upload(upload{tenant: tenantID, contentType: "image/png", name: "ok.png", data: pngData})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := s.waitDeadLetter(ids[i], 60*time.Second)
			if d.reason != "PERMANENT_FAILURE" || d.class != string(fabric.ClassPermanent) || d.attempts != 1 {
				t.Errorf("dead letter reason %q class %q attempts %d, want %s, permanent, 1", d.reason, d.class, d.attempts, "PERMANENT_FAILURE")
			}
			if !strings.Contains(d.err, c.error) {
				t.Errorf("dead letter error %q, want it to mention %q", d.err, c.error)
			}
			if n, m := len(s.find("document.processed.v1", ids[i])), len(s.find("document.validated.v1", ids[i])); n != 0 || m != 0 {
				t.Errorf("%d processed and %d validated events for a bad file, want none", n, m)
			}
		})
	}
	t.Run("the next good file is processed", func(t *testing.T) {
		fabrictest.Eventually(t, 60*time.Second, "good file processed", func() bool {
			return len(s.find("document.processed.v1", good)) == 1
		})
	})
}

func TestDocumentWorkerRetriesWhenDependenciesAreDown(t *testing.T) {
	// An engine that hangs: killed at OCR_TIMEOUT.
	hang := filepath.Join(t.TempDir(), "tesseract")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		extra map[string]string
		error string
	}{
		{"ocr engine missing", map[string]string{"TESSERACT_BIN": "/nonexistent/tesseract"}, "dependency unavailable"},
		{"ocr engine times out", map[string]string{"TESSERACT_BIN": hang, "OCR_TIMEOUT": "300ms"}, "no result within 300ms"},
		{"object storage unreachable", map[string]string{"S3_ENDPOINT": "127.0.0.1:1"}, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStack(t)
			w := s.start(c.extra)
			tenantID := deploytest.Unique("org-a-")
			id := s.upload(upload{tenant: tenantID, contentType: "image/png", name: "x.png",
				data: mustDoc(t)(doctest.PNG([]string{"Documento"}, 36))})
			d := s.waitDeadLetter(id, 90*time.Second)
			// Two retry tiers, then the DLQ: three attempts in all.
			if d.reason != "RETRIES_EXHAUSTED" || d.class != string(fabric.ClassTransient) || d.attempts != 3 {
				t.Errorf("dead letter reason %q class %q attempts %d, want %s, transient, 3", d.reason, d.class, d.attempts, "RETRIES_EXHAUSTED")
			}
			if !strings.Contains(d.err, c.error) {
				t.Errorf("dead letter error %q, want it to mention %q", d.err, c.error)
			}
			if n := w.count("message scheduled for retry"); n != 2 {
				t.Errorf("%d retries logged, want 2", n)
			}
		})
	}
}

func TestLoadConfigRejects(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"low dpi", map[string]string{"OCR_DPI": "50"}, "OCR_DPI"},
		{"bad timeout", map[string]string{"OCR_TIMEOUT": "soon"}, "OCR_TIMEOUT"},
		{"zero concurrency", map[string]string{"WORKER_CONCURRENCY": "0"}, "WORKER_CONCURRENCY"},
		{"bad retry tiers", map[string]string{"RETRY_TIERS": "1s,-2s"}, "RETRY_TIERS"},
		{"zero min letters", map[string]string{"DOCUMENT_MIN_LETTERS": "0"}, "DOCUMENT_MIN_LETTERS"},
		{"min letters not a number", map[string]string{"DOCUMENT_MIN_LETTERS": "many"}, "DOCUMENT_MIN_LETTERS"},
	}
	for _, c := range cases {
		_, err := loadConfig(func(k string) string { return c.env[k] })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: loadConfig error = %v, want one naming %s", c.name, err, c.want)
		}
	}
}

// TestDocumentWorkerReprocessesOnCommand: an operator's document.process.v1
// makes the worker read a processed document again and announce and index
// it again, caused by the command. A command of another tenant, or for a
// document the worker never processed, is dead-lettered at once.
func TestDocumentWorkerReprocessesOnCommand(t *testing.T) {
	s := newStack(t)
	s.start(nil)
	tenantA, tenantB := deploytest.Unique("org-a-"), deploytest.Unique("org-b-")
	docID := s.upload(upload{tenant: tenantA, contentType: "text/plain", name: "note.txt", data: []byte("Requerimento de alvará")})
	fabrictest.Eventually(t, 60*time.Second, "upload processed", func() bool {
		return len(s.find("document.processed.v1", docID)) == 1
	})
	command := func(tenantID, documentID string) envelope.Envelope {
		e, err := envelope.New("document.process.v1", tenantID, "request-service", map[string]any{"documentId": documentID})
		if err != nil {
			t.Fatal(err)
		}
		s.Publish(t, e)
		return e
	}
	cmd := command(tenantA, docID)
	fabrictest.Eventually(t, 60*time.Second, "document processed again", func() bool {
		return len(s.find("document.processed.v1", docID)) == 2 && len(s.find("ai.knowledge.index.v1", docID)) == 2
	})
	fabrictest.Eventually(t, 60*time.Second, "document judged again", func() bool {
		return len(s.find("document.validated.v1", docID)) == 2
	})
	for _, typ := range []string{"document.processed.v1", "document.validated.v1", "ai.knowledge.index.v1"} {
		if again := s.find(typ, docID)[1]; again.CausationID != cmd.ID || again.TenantID != tenantA {
			t.Errorf("%s after the command: causation %s tenant %s, want %s and %s", typ, again.CausationID, again.TenantID, cmd.ID, tenantA)
		}
	}
	if got := s.text(tenantA, docID); got != "Requerimento de alvará" {
		t.Errorf("text after reprocessing = %q", got)
	}

	for name, c := range map[string]struct{ tenant, doc string }{
		"another tenant's document":  {tenantB, docID},
		"a document never processed": {tenantA, uuid.NewString()},
	} {
		t.Run(name, func(t *testing.T) {
			command(c.tenant, c.doc)
			d := s.waitDeadLetterIn("document.process-commands.dlq", c.doc, 60*time.Second)
			if d.class != string(fabric.ClassPermanent) || !strings.Contains(d.err, "document unknown to the worker") {
				t.Errorf("dead letter class %q error %q, want permanent, document unknown to the worker", d.class, d.err)
			}
		})
	}
}
