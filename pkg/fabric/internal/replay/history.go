package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HistoryError is an answer of the history other than 200.
type HistoryError struct {
	Status int
	Detail string
}

func (e *HistoryError) Error() string {
	return fmt.Sprintf("history: %d %s", e.Status, e.Detail)
}

// HTTPHistory reads the data lake's GET /v1/history at BaseURL (the
// datalake-ingestion service, HISTORY_URL).
type HTTPHistory struct {
	BaseURL string
	Client  *http.Client
}

// Page returns one page of the selection after the cursor after.
func (h HTTPHistory) Page(ctx context.Context, bearer string, sel Selection, after string, limit int) ([]json.RawMessage, string, error) {
	q := url.Values{}
	for _, t := range sel.Types {
		q.Add("type", t)
	}
	if sel.CorrelationID != "" {
		q.Set("correlationId", sel.CorrelationID)
	}
	if sel.From != nil {
		q.Set("from", sel.From.UTC().Format(time.RFC3339Nano))
	}
	if sel.To != nil {
		q.Set("to", sel.To.UTC().Format(time.RFC3339Nano))
	}
	if after != "" {
		q.Set("after", after)
	}
	q.Set("limit", strconv.Itoa(limit))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(h.BaseURL, "/")+"/v1/history?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	client := h.Client
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("history: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, "", fmt.Errorf("history: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &p)
		if p.Detail == "" {
			p.Detail = http.StatusText(resp.StatusCode)
		}
		return nil, "", &HistoryError{Status: resp.StatusCode, Detail: p.Detail}
	}
	var page struct {
		Events []json.RawMessage `json:"events"`
		Next   string            `json:"next"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, "", fmt.Errorf("history: the answer is not a page of events: %w", err)
	}
	return page.Events, page.Next, nil
}
