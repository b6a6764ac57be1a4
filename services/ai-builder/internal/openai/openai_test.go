package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
	"github.com/agora-platform/agora/services/ai-builder/internal/openai"
)

// apiServer is a stand-in for an external OpenAI-compatible API, which we
// do not own: it records what reached it and answers with fixed data.
type apiServer struct {
	mu     sync.Mutex
	bodies map[string][]string // path → raw request bodies
	auth   []string
	status int
	dims   int
}

func newAPI(t *testing.T, dims int) (*apiServer, *httptest.Server) {
	a := &apiServer{bodies: map[string][]string{}, status: http.StatusOK, dims: dims}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.bodies[r.URL.Path] = append(a.bodies[r.URL.Path], string(body))
		a.auth = append(a.auth, r.Header.Get("Authorization"))
		status := a.status
		a.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "overloaded", status)
			return
		}
		switch r.URL.Path {
		case "/v1/embeddings":
			var req struct {
				Input []string `json:"input"`
			}
			_ = json.Unmarshal(body, &req)
			type item struct {
				Index     int       `json:"index"`
				Embedding []float32 `json:"embedding"`
			}
			var data []item
			for i := range req.Input {
				v := make([]float32, a.dims)
				v[i%a.dims] = 1
				data = append(data, item{Index: i, Embedding: v})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
		case "/v1/chat/completions":
			_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{
				map[string]any{"message": map[string]string{"role": "assistant", "content": "A padaria fica na rua das Flores [1]."}}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return a, srv
}

const personal = "Requerente João, CPF 123.456.789-09, e-mail joao.silva@example.com, telefone (11) 98765-4321."

func TestEmbedderMasksAndKeepsOrder(t *testing.T) {
	api, srv := newAPI(t, 8)
	e := openai.Embedder{Client: openai.Client{BaseURL: srv.URL + "/v1", APIKey: "test-key", HTTP: srv.Client()}, Model: "emb-model", Dimensions: 8}
	vecs, err := e.Embed(context.Background(), []string{personal, "segundo texto", "terceiro"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || vecs[1][1] != 1 || vecs[2][2] != 1 {
		t.Errorf("vectors out of order: %v", vecs)
	}
	body := api.bodies["/v1/embeddings"][0]
	for _, leaked := range []string{"123.456.789-09", "joao.silva@example.com", "98765-4321"} {
		if strings.Contains(body, leaked) {
			t.Errorf("request body carries %q: %s", leaked, body)
		}
	}
	var req struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if req.Model != "emb-model" || req.Dimensions != 8 || !strings.Contains(req.Input[0], "CPF [CPF]") {
		t.Errorf("request = %+v, want model emb-model, 8 dimensions, masked CPF", req)
	}
	if api.auth[0] != "Bearer test-key" {
		t.Errorf("Authorization = %q, want the API key as bearer", api.auth[0])
	}
}

func TestEmbedderFailures(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		serverDims int
		unavail    bool
	}{
		{"overloaded", http.StatusTooManyRequests, 8, true},
		{"server error", http.StatusBadGateway, 8, true},
		{"bad request", http.StatusBadRequest, 8, false},
		{"wrong dimension", http.StatusOK, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api, srv := newAPI(t, c.serverDims)
			api.status = c.status
			e := openai.Embedder{Client: openai.Client{BaseURL: srv.URL + "/v1", HTTP: srv.Client()}, Model: "m", Dimensions: 8}
			_, err := e.Embed(context.Background(), []string{"x"})
			if err == nil || errors.Is(err, knowledge.ErrUnavailable) != c.unavail {
				t.Errorf("Embed error = %v, want an error with unavailable = %v", err, c.unavail)
			}
		})
	}
	e := openai.Embedder{Client: openai.Client{BaseURL: "http://127.0.0.1:1/v1", HTTP: http.DefaultClient}, Model: "m", Dimensions: 8}
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, knowledge.ErrUnavailable) {
		t.Errorf("Embed to a closed port: %v, want ErrUnavailable", err)
	}
}

func TestGeneratorSendsMaskedPrompt(t *testing.T) {
	api, srv := newAPI(t, 8)
	g := openai.Generator{Client: openai.Client{BaseURL: srv.URL + "/v1", APIKey: "k", HTTP: srv.Client()}, Model: "chat-model"}
	answer, err := g.Generate(context.Background(), "Qual o telefone de joao.silva@example.com, CPF 12345678909?",
		[]knowledge.Passage{{ChunkID: "c1", DocumentID: "d1", Content: personal}})
	if err != nil {
		t.Fatal(err)
	}
	if answer != "A padaria fica na rua das Flores [1]." {
		t.Errorf("answer = %q", answer)
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(api.bodies["/v1/chat/completions"][0]), &req); err != nil {
		t.Fatal(err)
	}
	if req.Model != "chat-model" || len(req.Messages) != 2 {
		t.Fatalf("request = %+v, want chat-model with system and user messages", req)
	}
	want := "[1] Requerente João, CPF [CPF], e-mail [EMAIL], telefone [TELEFONE].\n\nQuestion: Qual o telefone de [EMAIL], CPF [CPF]?"
	if got := req.Messages[1].Content; got != want {
		t.Errorf("user prompt = %q, want %q", got, want)
	}
}
