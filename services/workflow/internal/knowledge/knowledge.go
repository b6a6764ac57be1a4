// Package knowledge retrieves passages of a tenant's own documents through
// the AI builder's chat API (POST /v1/chat), as an attendant of that
// tenant would: with a service token minted for the event's tenant, so the
// AI builder's tenant scoping (the token's tenant_id, its row-level
// security and per-tenant vector partition) applies unchanged.
package knowledge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/text"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// Answer is what the AI builder found for a question.
type Answer struct {
	// Text is its answer: sentences of the passages, numbered [n] as
	// Passages (or a generated answer citing them).
	Text     string
	Passages []subscription.Passage
	// Version identifies the knowledge the passages came from. The AI
	// builder exposes no index version and no indexed_at, so it is the
	// digest of the cited chunks ("chunks:sha256:…"): a chunk id is new
	// each time its document is indexed again, so the digest changes
	// exactly when the cited knowledge does.
	Version string
}

// Tokens mints a bearer token for a tenant (servicetoken.Minter).
type Tokens interface {
	Mint(tenantID string) (string, error)
}

// Client calls the AI builder at BaseURL.
type Client struct {
	BaseURL string
	Tokens  Tokens
	HTTP    *http.Client
}

// New returns a client of the AI builder at base (absolute http or https).
func New(base string, tokens Tokens, hc *http.Client) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: want an absolute http or https URL", base)
	}
	return &Client{BaseURL: strings.TrimRight(base, "/"), Tokens: tokens, HTTP: hc}, nil
}

// Ask asks tenantID's documents question, for topK passages.
func (c *Client) Ask(ctx context.Context, tenantID, question string, topK int) (Answer, error) {
	token, err := c.Tokens.Mint(tenantID)
	if err != nil {
		return Answer{}, fmt.Errorf("service token: %w", err)
	}
	body, err := json.Marshal(map[string]any{"question": question, "topK": topK})
	if err != nil {
		return Answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/v1/chat", bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("POST /v1/chat: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Answer{}, fmt.Errorf("POST /v1/chat: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("POST /v1/chat: %s: %s", resp.Status, text.Truncate(string(raw), 300))
	}
	var out struct {
		Answer    string                 `json:"answer"`
		Citations []subscription.Passage `json:"citations"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return Answer{}, fmt.Errorf("POST /v1/chat: decode: %w", err)
	}
	if out.Citations == nil {
		out.Citations = []subscription.Passage{}
	}
	return Answer{Text: out.Answer, Passages: out.Citations, Version: version(out.Citations)}, nil
}

// version digests the cited chunks, in a stable order.
func version(ps []subscription.Passage) string {
	refs := make([]string, len(ps))
	for i, p := range ps {
		refs[i] = p.DocumentID + "/" + p.ChunkID
	}
	slices.Sort(refs)
	sum := sha256.Sum256([]byte(strings.Join(refs, "\n")))
	return "chunks:sha256:" + hex.EncodeToString(sum[:])
}
