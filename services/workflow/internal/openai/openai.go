// Package openai calls a model behind an OpenAI-compatible chat API
// (POST {base}/chat/completions): OpenAI itself, vLLM, llama.cpp's server,
// Ollama and the like.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/text"
)

// Client is a chat-completions endpoint and its key.
type Client struct {
	base string
	key  string
	http *http.Client
}

// New returns a client of the API at base (e.g. https://api.openai.com/v1;
// absolute http or https); key may be empty.
func New(base, key string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: want an absolute http or https URL", base)
	}
	return &Client{base: strings.TrimRight(base, "/"), key: key, http: hc}, nil
}

// Complete posts body (a chat-completions request) as it is and returns
// the first choice's message content.
func (c *Client) Complete(ctx context.Context, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("POST /chat/completions: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("POST /chat/completions: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST /chat/completions: %s: %s", resp.Status, text.Truncate(string(raw), 300))
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("POST /chat/completions: decode: %w", err)
	}
	if len(out.Choices) == 0 {
		return "", errors.New("POST /chat/completions: no choice in the answer")
	}
	return out.Choices[0].Message.Content, nil
}
