package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/e2e/harness"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/document-worker/doctest"
)

// Two documents with different subjects, so each question has one right source.
var (
	pngLines = doctest.Lines // the bakery permit on rua das Flores
	pdfLines = []string{
		"O imposto predial e territorial urbano vence em dezembro.",
		"O contribuinte pode parcelar o débito em até dez vezes sem juros.",
		"O boleto é enviado pelos Correios ao endereço do imóvel.",
	}
)

// TestDocumentFlow uploads a PNG and a PDF for tenant A through the request
// service, waits until the document worker and the ai-builder have indexed
// them, and asks the chat: tenant A gets the passage and its citation,
// tenant B gets nothing of A. A corrupt upload lands in
// document.processing.dlq with a reason while the next good file goes
// through.
func TestDocumentFlow(t *testing.T) {
	h := harness.New(t, os.Getenv)
	indexed := watchIndexed(t, h)
	h.Start(t, "request")
	h.Start(t, "document-worker")
	h.Start(t, "ai-builder")
	tenantA, tenantB := "org-a-"+randHex(3), "org-b-"+randHex(3)
	citizen := h.Token(tenantA, "citizen-"+randHex(2), "citizen")
	attendantA := h.Token(tenantA, "attendant-a", "attendant")
	attendantB := h.Token(tenantB, "attendant-b", "attendant")

	pngData, err := doctest.PNG(pngLines, 36)
	if err != nil {
		t.Fatal(err)
	}
	pdfData, err := doctest.TextPDF(pdfLines)
	if err != nil {
		t.Fatal(err)
	}
	reqID := submitRequest(t, h.URL("request"), citizen)
	pngDoc := uploadDocument(t, h.URL("request"), citizen, reqID, "alvara.png", pngData)
	pdfDoc := uploadDocument(t, h.URL("request"), citizen, reqID, "iptu.pdf", pdfData)
	indexed.wait(t, pngDoc, 3*time.Minute)
	indexed.wait(t, pdfDoc, 3*time.Minute)

	cases := []struct {
		question, wantDoc, wantText string
	}{
		{"Em que rua fica a padaria do alvará de funcionamento?", pngDoc, "rua das Flores"},
		{"Em quantas vezes posso parcelar o imposto predial?", pdfDoc, "dez vezes"},
	}
	for _, c := range cases {
		t.Run("tenant A: "+c.question, func(t *testing.T) {
			a := askChat(t, h.URL("ai-builder"), attendantA, c.question)
			if len(a.Citations) == 0 || a.Citations[0].DocumentID != c.wantDoc {
				t.Fatalf("citations = %+v, want document %s first", a.Citations, c.wantDoc)
			}
			if a.Citations[0].ChunkID == "" || a.Citations[0].Score <= 0 {
				t.Errorf("first citation %+v, want a chunk id and a positive score", a.Citations[0])
			}
			if !strings.Contains(a.Answer, c.wantText) {
				t.Errorf("answer = %q, want it to contain %q", a.Answer, c.wantText)
			}
		})
		t.Run("tenant B: "+c.question, func(t *testing.T) {
			a := askChat(t, h.URL("ai-builder"), attendantB, c.question)
			for _, cit := range a.Citations {
				if cit.DocumentID == pngDoc || cit.DocumentID == pdfDoc {
					t.Errorf("tenant B was cited tenant A's document %s", cit.DocumentID)
				}
			}
			if strings.Contains(a.Answer, c.wantText) {
				t.Errorf("tenant B's answer %q carries tenant A's text", a.Answer)
			}
		})
	}

	t.Run("a corrupt file is dead-lettered and the next good one is processed", func(t *testing.T) {
		// A truncated PNG still sniffs as image/png, so the request service
		// accepts it; only reading it shows it is broken.
		corrupt := uploadDocument(t, h.URL("request"), citizen, reqID, "quebrado.png", pngData[:len(pngData)/3])
		good := uploadDocument(t, h.URL("request"), citizen, reqID, "nota.txt",
			[]byte("Nota do atendimento: o alvará da padaria foi aprovado pela vigilância sanitária.\n"))
		dl := waitDeadLetter(t, h, "document.processing.dlq", corrupt, 2*time.Minute)
		if dl.reason != "PERMANENT_FAILURE" || !strings.Contains(dl.err, "corrupt") {
			t.Errorf("dead letter reason %q error %q, want %s naming a corrupt file", dl.reason, dl.err, "PERMANENT_FAILURE")
		}
		indexed.wait(t, good, 2*time.Minute)
		a := askChat(t, h.URL("ai-builder"), attendantA, "O alvará foi aprovado pela vigilância sanitária?")
		if len(a.Citations) == 0 || a.Citations[0].DocumentID != good {
			t.Errorf("citations = %+v, want the note %s first", a.Citations, good)
		}

		t.Run("an operator has it processed again (document.process.v1)", func(t *testing.T) {
			path := h.URL("request") + "/v1/requests/" + reqID + "/documents/" + good + "/reprocess"
			for _, tc := range []struct {
				name, token string
				want        int
			}{
				{"an attendant", attendantA, http.StatusForbidden},
				{"an operator of another tenant", h.Token(tenantB, "operator-b", "operator"), http.StatusNotFound},
				{"an operator of the tenant", h.Token(tenantA, "operator-a", "operator"), http.StatusAccepted},
			} {
				req, _ := http.NewRequest(http.MethodPost, path, nil)
				if status, body := do(t, req, tc.token); status != tc.want {
					t.Fatalf("%s: POST reprocess = %d %s, want %d", tc.name, status, body, tc.want)
				}
			}
			indexed.waitTimes(t, good, 2, 2*time.Minute)
		})
	})
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// indexedWatch collects ai.knowledge-indexed.v1 from a queue of the test's
// own, bound before any service publishes.
type indexedWatch struct {
	mu    sync.Mutex
	docs  map[string]int // documentId → chunks
	times map[string]int // documentId → how often indexed
}

func watchIndexed(t *testing.T, h *harness.Harness) *indexedWatch {
	t.Helper()
	conn := h.Vhost.Dial(t, func(ctx context.Context, c *amqp.Connection) error {
		return topology.Apply(ctx, c, topology.Description{Exchanges: topology.PlatformExchanges()})
	})
	ch, err := conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "ai.knowledge-indexed.v1", topology.EventsExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &indexedWatch{docs: map[string]int{}, times: map[string]int{}}
	go func() {
		for d := range deliveries {
			e, err := envelope.Decode(d.Body, 0)
			if err != nil {
				continue
			}
			var p struct {
				DocumentID string `json:"documentId"`
				Chunks     int    `json:"chunks"`
			}
			if json.Unmarshal(e.Payload, &p) == nil {
				w.mu.Lock()
				w.docs[p.DocumentID] = p.Chunks
				w.times[p.DocumentID]++
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *indexedWatch) wait(t *testing.T, documentID string, timeout time.Duration) {
	t.Helper()
	w.waitTimes(t, documentID, 1, timeout)
}

// waitTimes waits until documentID has been indexed, with chunks, at least
// n times.
func (w *indexedWatch) waitTimes(t *testing.T, documentID string, n int, timeout time.Duration) {
	t.Helper()
	fabrictest.Eventually(t, timeout, fmt.Sprintf("ai.knowledge-indexed.v1 of %s, %d times", documentID, n), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.docs[documentID] > 0 && w.times[documentID] >= n
	})
}

func do(t *testing.T, req *http.Request, token string) (int, []byte) {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func submitRequest(t *testing.T, base, token string) string {
	t.Helper()
	body := `{"serviceId":"alvara-funcionamento","formId":"alvara","formVersion":1,"channel":"web","fields":{"estabelecimento":"padaria"}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/requests", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	status, data := do(t, req, token)
	if status != http.StatusCreated && status != http.StatusAccepted {
		t.Fatalf("submit request: %d %s", status, data)
	}
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.ID == "" {
		t.Fatalf("submit request: body %s: %v", data, err)
	}
	return r.ID
}

func uploadDocument(t *testing.T, base, token, requestID, name string, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	part.Write(data)
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/requests/"+requestID+"/documents", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	status, body := do(t, req, token)
	if status != http.StatusCreated {
		t.Fatalf("upload %s: %d %s", name, status, body)
	}
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &d); err != nil || d.ID == "" {
		t.Fatalf("upload %s: body %s: %v", name, body, err)
	}
	return d.ID
}

type chatReply struct {
	Answer    string `json:"answer"`
	Citations []struct {
		DocumentID string  `json:"documentId"`
		ChunkID    string  `json:"chunkId"`
		Score      float64 `json:"score"`
	} `json:"citations"`
}

func askChat(t *testing.T, base, token, question string) chatReply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"question": question, "topK": 5})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	status, data := do(t, req, token)
	if status != http.StatusOK {
		t.Fatalf("chat: %d %s", status, data)
	}
	var a chatReply
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("chat body %s: %v", data, err)
	}
	return a
}

type deadLetter struct{ reason, err string }

// waitDeadLetter looks into queue (returning what it reads) until the
// dead letter of documentID is there.
func waitDeadLetter(t *testing.T, h *harness.Harness, queue, documentID string, timeout time.Duration) deadLetter {
	t.Helper()
	conn := h.Vhost.Dial(t)
	var found deadLetter
	fabrictest.Eventually(t, timeout, fmt.Sprintf("dead letter of %s in %s", documentID, queue), func() bool {
		ch, err := conn.Channel(context.Background())
		if err != nil {
			return false
		}
		defer ch.Close()
		var last uint64
		defer func() {
			if last > 0 {
				_ = ch.Nack(last, true, true)
			}
		}()
		for {
			d, ok, err := ch.Get(queue, false)
			if err != nil || !ok {
				return false
			}
			last = d.DeliveryTag
			e, err := envelope.Decode(d.Body, 0)
			if err != nil {
				continue
			}
			var p struct {
				DocumentID string `json:"documentId"`
			}
			if json.Unmarshal(e.Payload, &p) == nil && p.DocumentID == documentID {
				found.reason, _ = d.Headers["x-fabric-reason"].(string)
				found.err, _ = d.Headers["x-fabric-error"].(string)
				return true
			}
		}
	})
	return found
}
