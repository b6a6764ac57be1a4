// Package openai talks to an OpenAI-compatible HTTP API: /embeddings for
// vectors and /chat/completions for generated answers. Every text is
// masked (CPF numbers, e-mail addresses, phone numbers) before it is sent:
// this is where text leaves the platform.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agora-platform/agora/pkg/fabric/text"
	"io"
	"net/http"
	"strings"

	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
	"github.com/agora-platform/agora/services/ai-builder/internal/privacy"
)

// Client is an API endpoint with its credentials.
type Client struct {
	BaseURL string // e.g. https://api.example/v1 (no trailing slash needed)
	APIKey  string
	HTTP    *http.Client
}

func (c Client) post(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %v: %w", path, err, knowledge.ErrUnavailable)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("POST %s: read: %v: %w", path, err, knowledge.ErrUnavailable)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("POST %s: %s: %w", path, resp.Status, knowledge.ErrUnavailable)
	case resp.StatusCode >= 300:
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, text.Truncate(string(raw), 300))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("POST %s: decode: %w", path, err)
	}
	return nil
}

// Embedder requests embeddings of a fixed dimension.
type Embedder struct {
	Client     Client
	Model      string
	Dimensions int
}

var _ knowledge.Embedder = Embedder{}

// Name identifies the model.
func (e Embedder) Name() string { return "openai:" + e.Model }

// Embed masks texts and returns their embeddings in order. A vector of
// another dimension than e.Dimensions is an error (the vector column has a
// fixed dimension); an unreachable or overloaded API is
// knowledge.ErrUnavailable.
func (e Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	masked := make([]string, len(texts))
	for i, t := range texts {
		masked[i] = privacy.Mask(t)
	}
	var resp struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := e.Client.post(ctx, "/embeddings", map[string]any{
		"model": e.Model, "input": masked, "dimensions": e.Dimensions, "encoding_format": "float",
	}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings: %d vectors for %d texts", len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings: bad index %d", d.Index)
		}
		if len(d.Embedding) != e.Dimensions {
			return nil, fmt.Errorf("embeddings: %d dimensions, want %d", len(d.Embedding), e.Dimensions)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// Generator writes answers with a chat model.
type Generator struct {
	Client Client
	Model  string
}

var _ knowledge.Generator = Generator{}

const systemPrompt = "You answer questions of public-service attendants using only the numbered passages given. " +
	"Cite passages as [n]. If the passages do not answer the question, say so. Answer in the language of the question."

// Generate masks the question and passages, asks the model and returns its
// answer; knowledge.ErrUnavailable when the API cannot be reached.
func (g Generator) Generate(ctx context.Context, question string, passages []knowledge.Passage) (string, error) {
	var b strings.Builder
	for i, p := range passages {
		fmt.Fprintf(&b, "[%d] %s\n\n", i+1, privacy.Mask(p.Content))
	}
	fmt.Fprintf(&b, "Question: %s", privacy.Mask(question))
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := g.Client.post(ctx, "/chat/completions", map[string]any{
		"model": g.Model,
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": b.String()},
		},
		"temperature": 0,
	}, &resp); err != nil {
		return "", err
	}
	if len(resp.Choices) == 0 || strings.TrimSpace(resp.Choices[0].Message.Content) == "" {
		return "", errors.New("chat completion: empty answer")
	}
	return resp.Choices[0].Message.Content, nil
}
