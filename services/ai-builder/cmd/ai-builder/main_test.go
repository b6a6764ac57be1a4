package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/ai-builder/internal/postgres"
)

// stack is the ai-builder on the shared test stack (deploytest.Stack),
// with the documents bucket, the document worker's part (text objects and
// index commands) and an observer of ai.knowledge-indexed.v1.
type stack struct {
	*deploytest.Stack
	t      testing.TB
	s3     *minio.Client
	bucket string
	// indexed sees ai.knowledge-indexed.v1 once the first instance has
	// declared the exchanges.
	indexed interface {
		Matching(testing.TB, func(envelope.Envelope) bool) []envelope.Envelope
	}
}

func newStack(t testing.TB) *stack {
	t.Helper()
	s := &stack{Stack: deploytest.NewStack(t, "ai-builder"), t: t, bucket: "documents"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.s3 = s.S3(t)
	// The request service makes the bucket; here the test does.
	if ok, err := s.s3.BucketExists(ctx, s.bucket); err != nil {
		t.Fatalf("minio (run `make infra`): %v", err)
	} else if !ok {
		if err := s.s3.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}); err != nil {
			if ok, _ := s.s3.BucketExists(ctx, s.bucket); !ok {
				t.Fatalf("make bucket: %v", err)
			}
		}
	}
	return s
}

// waitIndexed waits for the n-th ai.knowledge-indexed.v1 of documentID.
func (s *stack) waitIndexed(documentID string, n int) indexedEvent {
	s.t.Helper()
	var found []envelope.Envelope
	fabrictest.Eventually(s.t, 60*time.Second, "ai.knowledge-indexed.v1 of "+documentID, func() bool {
		found = s.indexed.Matching(s.t, func(e envelope.Envelope) bool {
			var p indexedEvent
			return json.Unmarshal(e.Payload, &p) == nil && p.DocumentID == documentID
		})
		return len(found) >= n
	})
	var p indexedEvent
	if err := json.Unmarshal(found[n-1].Payload, &p); err != nil {
		s.t.Fatal(err)
	}
	p.TenantID = found[n-1].TenantID
	return p
}

type indexedEvent struct {
	TenantID   string
	DocumentID string `json:"documentId"`
	Chunks     int    `json:"chunks"`
	Embedder   string `json:"embedder"`
	Dimensions int    `json:"dimensions"`
}

// start runs an instance with short retry tiers and extra, and returns
// its base URL.
func (s *stack) start(extra map[string]string) string {
	s.t.Helper()
	vars := map[string]string{"RETRY_TIERS": "300ms,300ms"}
	maps.Copy(vars, extra)
	url := s.Start(s.t, run, vars).URL
	if s.indexed == nil {
		s.indexed = fabrictest.Observe(s.t, s.Conn, "ai.knowledge-indexed.v1")
	}
	return url
}

// putText stores text as the document worker would and returns its key.
func (s *stack) putText(tenantID, documentID, text string) string {
	s.t.Helper()
	key := fmt.Sprintf("tenant=%s/documents/%s/text.txt", tenantID, documentID)
	if _, err := s.s3.PutObject(context.Background(), s.bucket, key, strings.NewReader(text), int64(len(text)),
		minio.PutObjectOptions{ContentType: "text/plain; charset=utf-8"}); err != nil {
		s.t.Fatalf("put %s: %v", key, err)
	}
	return key
}

// index sends the command ai.knowledge.index.v1 for tenantID.
func (s *stack) index(tenantID, documentID, textKey string) {
	s.t.Helper()
	e, err := envelope.New("ai.knowledge.index.v1", tenantID, "document-worker", map[string]any{
		"documentId": documentID, "requestId": uuid.NewString(), "textObjectKey": textKey, "language": "por"})
	if err != nil {
		s.t.Fatal(err)
	}
	s.Publish(s.t, e)
}

type chatAnswer struct {
	Answer    string `json:"answer"`
	Generated bool   `json:"generated"`
	Citations []struct {
		DocumentID string  `json:"documentId"`
		ChunkID    string  `json:"chunkId"`
		Score      float64 `json:"score"`
	} `json:"citations"`
}

// chat posts body to /v1/chat with contentType (none when empty).
func chat(t testing.TB, base, token, contentType, body string) deploytest.Response {
	t.Helper()
	h := map[string]string{}
	if contentType != "" {
		h["Content-Type"] = contentType
	}
	return deploytest.Do(t, http.MethodPost, base+"/v1/chat", token, body, h)
}

func ask(t testing.TB, base, token, question string, topK int) chatAnswer {
	t.Helper()
	r := deploytest.Do(t, http.MethodPost, base+"/v1/chat", token, map[string]any{"question": question, "topK": topK}, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("chat status %d: %s", r.Status, r.Body)
	}
	var a chatAnswer
	r.JSON(t, &a)
	return a
}

const (
	docPadaria = "Certidão de residência emitida pela prefeitura municipal. " +
		"O requerente solicita a renovação do alvará de funcionamento da padaria situada na rua das Flores, número 120. " +
		"A taxa de serviço foi paga no dia quinze de março."
	docIPTU = "O imposto predial e territorial urbano vence em dezembro. " +
		"O contribuinte pode parcelar o débito em até dez vezes sem juros."
	question = "Em que rua fica a padaria do alvará?"
)

func TestIndexAndChat(t *testing.T) {
	s := newStack(t)
	base := s.start(nil)
	tenantA, tenantB := deploytest.Unique("org-a-"), deploytest.Unique("org-b-")
	padaria, iptu, other := uuid.NewString(), uuid.NewString(), uuid.NewString()
	s.index(tenantA, padaria, s.putText(tenantA, padaria, docPadaria))
	s.index(tenantA, iptu, s.putText(tenantA, iptu, docIPTU))
	// Tenant B has knowledge of its own, so its partition exists too.
	s.index(tenantB, other, s.putText(tenantB, other, docIPTU))
	ev := s.waitIndexed(padaria, 1)
	s.waitIndexed(iptu, 1)
	s.waitIndexed(other, 1)
	if ev.TenantID != tenantA || ev.Chunks != 1 || ev.Embedder != "hash-v1" || ev.Dimensions != 384 {
		t.Errorf("indexed event = %+v, want tenant %s, 1 chunk, hash-v1, 384 dimensions", ev, tenantA)
	}

	t.Run("each tenant has its partition with an HNSW index", func(t *testing.T) {
		for _, tenantID := range []string{tenantA, tenantB} {
			part := postgres.PartitionName(tenantID)
			var def string
			if err := s.Pool.QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes
				WHERE schemaname = $1 AND tablename = $2 AND indexdef LIKE '%hnsw%'`, s.Schema, part).Scan(&def); err != nil {
				t.Fatalf("HNSW index of %s: %v", part, err)
			}
			if !strings.Contains(def, "vector_cosine_ops") {
				t.Errorf("index %q, want vector_cosine_ops", def)
			}
			var foreign int
			if err := s.Pool.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*) FROM %s WHERE tenant_id <> $1",
				pgx.Identifier{s.Schema, part}.Sanitize()), tenantID).Scan(&foreign); err != nil || foreign != 0 {
				t.Errorf("partition %s holds %d rows of other tenants (err %v)", part, foreign, err)
			}
		}
	})

	t.Run("attendant of the tenant gets the passage with its citation", func(t *testing.T) {
		a := ask(t, base, s.Token(t, tenantA, "u-1", auth.RoleAttendant), question, 5)
		if len(a.Citations) != 2 || a.Citations[0].DocumentID != padaria {
			t.Fatalf("citations = %+v, want 2 with document %s first", a.Citations, padaria)
		}
		if a.Citations[0].Score <= a.Citations[1].Score || a.Citations[0].Score <= 0 {
			t.Errorf("scores %v then %v, want the padaria first and positive", a.Citations[0].Score, a.Citations[1].Score)
		}
		if !strings.Contains(a.Answer, "rua das Flores, número 120") || !strings.Contains(a.Answer, "[1]") || a.Generated {
			t.Errorf("answer = %q, want the extractive sentence about rua das Flores cited [1]", a.Answer)
		}
	})

	t.Run("another tenant never sees it", func(t *testing.T) {
		a := ask(t, base, s.Token(t, tenantB, "u-1", auth.RoleAttendant), question, 20)
		for _, c := range a.Citations {
			if c.DocumentID == padaria || c.DocumentID == iptu {
				t.Errorf("tenant B got tenant A's document %s", c.DocumentID)
			}
		}
		if strings.Contains(a.Answer, "Flores") {
			t.Errorf("tenant B's answer %q carries tenant A's text", a.Answer)
		}
		c := ask(t, base, s.Token(t, deploytest.Unique("org-c-"), "u-1", auth.RoleAttendant), question, 5)
		if len(c.Citations) != 0 {
			t.Errorf("a tenant without knowledge got citations %+v", c.Citations)
		}
	})

	t.Run("topK limits the citations", func(t *testing.T) {
		if a := ask(t, base, s.Token(t, tenantA, "u-1", auth.RoleAttendant), question, 1); len(a.Citations) != 1 {
			t.Errorf("topK 1 gave %d citations", len(a.Citations))
		}
	})

	t.Run("re-indexing replaces the document's chunks", func(t *testing.T) {
		var long strings.Builder
		for i := range 30 {
			fmt.Fprintf(&long, "Parágrafo %d da nova versão do documento sobre a padaria reformada. ", i)
		}
		s.index(tenantA, padaria, s.putText(tenantA, padaria, long.String()))
		ev := s.waitIndexed(padaria, 2)
		var n int
		var old bool
		if err := s.Pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*), bool_or(content LIKE '%%rua das Flores%%')
			FROM %s WHERE tenant_id = $1 AND document_id = $2`, pgx.Identifier{s.Schema, "chunk"}.Sanitize()),
			tenantA, padaria).Scan(&n, &old); err != nil {
			t.Fatal(err)
		}
		if n != ev.Chunks || n < 3 || old {
			t.Errorf("after re-index: %d rows (event says %d), old text present %v; want the new chunks only", n, ev.Chunks, old)
		}
	})

	t.Run("malformed and unauthorised requests", func(t *testing.T) {
		att := s.Token(t, tenantA, "u-1", auth.RoleAttendant)
		cases := []struct {
			name, token, contentType, body string
			status                         int
		}{
			{"no token", "", "application/json", `{"question":"x"}`, http.StatusUnauthorized},
			{"garbage token", "abc.def.ghi", "application/json", `{"question":"x"}`, http.StatusUnauthorized},
			{"citizen", s.Token(t, tenantA, "u-1", auth.RoleCitizen), "application/json", `{"question":"x"}`, http.StatusForbidden},
			{"not json", att, "application/json", `{"question":`, http.StatusBadRequest},
			{"unknown field", att, "application/json", `{"question":"x","tenantId":"org-b"}`, http.StatusBadRequest},
			{"wrong type", att, "application/json", `{"question":"x","topK":"five"}`, http.StatusBadRequest},
			{"trailing data", att, "application/json", `{"question":"x"} {}`, http.StatusBadRequest},
			{"form body", att, "application/x-www-form-urlencoded", `question=x`, http.StatusUnsupportedMediaType},
			{"empty question", att, "application/json", `{"question":"  "}`, http.StatusUnprocessableEntity},
			{"topK 0", att, "application/json", `{"question":"x","topK":0}`, http.StatusUnprocessableEntity},
			{"topK 21", att, "application/json", `{"question":"x","topK":21}`, http.StatusUnprocessableEntity},
		}
		for _, c := range cases {
			r := chat(t, base, c.token, c.contentType, c.body)
			var p struct {
				Status int    `json:"status"`
				Title  string `json:"title"`
			}
			ct := r.Header.Get("Content-Type")
			if r.Status != c.status || ct != "application/problem+json" || json.Unmarshal(r.Body, &p) != nil || p.Status != c.status {
				t.Errorf("%s: status %d, %s, %s; want %d with a problem body", c.name, r.Status, ct, r.Body, c.status)
			}
		}
		if a := ask(t, base, att, question, 0+5); len(a.Citations) == 0 {
			t.Error("a valid request after the bad ones got no citations")
		}
	})
	s.CheckRowSecurity(t, tenantA, nil)
}

// A command whose envelope says tenant A but whose key points into tenant
// B's objects is refused: nothing of B is read or written anywhere.
func TestIndexRefusesObjectsOfAnotherTenant(t *testing.T) {
	s := newStack(t)
	s.start(nil)
	tenantA, tenantB := deploytest.Unique("org-a-"), deploytest.Unique("org-b-")
	doc := uuid.NewString()
	keyOfB := s.putText(tenantB, doc, docPadaria)
	s.index(tenantA, doc, keyOfB)
	var reason, class, errText string
	fabrictest.Eventually(t, 30*time.Second, "dead letter in ai.knowledge-builder.dlq", func() bool {
		ch, err := s.Conn.Channel(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		d, ok, err := ch.Get("ai.knowledge-builder.dlq", true)
		if err != nil || !ok {
			return false
		}
		reason, _ = d.Headers["x-fabric-reason"].(string)
		class, _ = d.Headers["x-fabric-error-class"].(string)
		errText, _ = d.Headers["x-fabric-error"].(string)
		return true
	})
	if reason != "PERMANENT_FAILURE" || class != string(fabric.ClassPermanent) || !strings.Contains(errText, "outside the tenant's prefix") {
		t.Errorf("dead letter %s/%s %q, want a permanent failure naming the tenant prefix", reason, class, errText)
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*) FROM %s",
		pgx.Identifier{s.Schema, "chunk"}.Sanitize())).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d chunks written (err %v), want none", n, err)
	}
}

// With AI_CHAT_MODEL set, answers are generated by the (external, faked)
// model, which only ever sees masked text.
func TestChatGenerationMasksPersonalData(t *testing.T) {
	var mu sync.Mutex
	var prompts []string
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) != 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		prompts = append(prompts, req.Messages[1].Content)
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{
			map[string]any{"message": map[string]string{"content": "Segundo o documento [1], a padaria fica na rua das Flores."}}}})
	}))
	defer llm.Close()
	s := newStack(t)
	base := s.start(map[string]string{"AI_CHAT_MODEL": "test-model", "AI_BASE_URL": llm.URL + "/v1", "AI_API_KEY": "local-test-key"})
	tenantA := deploytest.Unique("org-a-")
	doc := uuid.NewString()
	text := docPadaria + " Contato do requerente: CPF 123.456.789-09, e-mail maria@example.com, telefone (21) 99876-5432."
	s.index(tenantA, doc, s.putText(tenantA, doc, text))
	s.waitIndexed(doc, 1)
	a := ask(t, base, s.Token(t, tenantA, "u-1", auth.RoleAttendant), "Qual a rua da padaria? Meu CPF é 98765432100.", 3)
	if !a.Generated || a.Answer != "Segundo o documento [1], a padaria fica na rua das Flores." || len(a.Citations) != 1 || a.Citations[0].DocumentID != doc {
		t.Errorf("answer = %+v, want the generated answer citing %s", a, doc)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(prompts) != 1 {
		t.Fatalf("model called %d times, want 1", len(prompts))
	}
	for _, leaked := range []string{"123.456.789-09", "98765432100", "maria@example.com", "99876-5432"} {
		if strings.Contains(prompts[0], leaked) {
			t.Errorf("prompt leaks %q: %s", leaked, prompts[0])
		}
	}
	if !strings.Contains(prompts[0], "rua das Flores") || !strings.Contains(prompts[0], "[CPF]") {
		t.Errorf("prompt = %q, want the passage with masks", prompts[0])
	}
}

func TestLoadConfigRejects(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown embedder", map[string]string{"AI_EMBEDDER": "word2vec"}, "AI_EMBEDDER"},
		{"openai without base URL", map[string]string{"AI_EMBEDDER": "openai"}, "AI_BASE_URL"},
		{"chat model without base URL", map[string]string{"AI_CHAT_MODEL": "m"}, "AI_BASE_URL"},
		{"zero ef_search", map[string]string{"AI_HNSW_EF_SEARCH": "0"}, "AI_HNSW_EF_SEARCH"},
		{"bad retry tiers", map[string]string{"RETRY_TIERS": "1s,soon"}, "RETRY_TIERS"},
		{"tiny chunks", map[string]string{"CHUNK_TARGET_CHARS": "10"}, "CHUNK_TARGET_CHARS"},
	}
	for _, c := range cases {
		_, err := loadConfig(func(k string) string { return c.env[k] })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: loadConfig error = %v, want one naming %s", c.name, err, c.want)
		}
	}
}

// An embedder whose dimension differs from the vector column is refused at
// start, before any chunk could be written.
func TestRunRefusesEmbedderOfAnotherDimension(t *testing.T) {
	s := newStack(t)
	vars := maps.Clone(s.Vars)
	vars["AI_EMBEDDING_DIMENSIONS"] = "1536"
	getenv := func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := run(ctx, []string{"ai-builder"}, getenv, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "1536") || !strings.Contains(err.Error(), "384") {
		t.Errorf("run = %v, want an error naming 1536 and the column's 384", err)
	}
}
