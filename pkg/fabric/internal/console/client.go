package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// callError is a service's refusal or failure, as the operator reads it.
type callError struct {
	Service string
	Status  int
	Detail  string
}

func (e *callError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s: %s", e.Service, e.Detail)
	}
	return fmt.Sprintf("%s answered %d: %s", e.Service, e.Status, e.Detail)
}

// request builds a call to t with the operator's token as its bearer.
func (c *console) request(ctx context.Context, op operator, t Target, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.URL+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+op.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// get calls GET path on t and decodes a 200's JSON body into out.
func (c *console) get(ctx context.Context, op operator, t Target, path string, out any) error {
	req, err := c.request(ctx, op, t, http.MethodGet, path, nil)
	if err != nil {
		return &callError{Service: t.Name, Detail: err.Error()}
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return &callError{Service: t.Name, Detail: "unreachable: " + err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return &callError{Service: t.Name, Status: resp.StatusCode, Detail: "reading the answer: " + err.Error()}
	}
	if resp.StatusCode != http.StatusOK {
		return refusal(t.Name, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &callError{Service: t.Name, Status: resp.StatusCode, Detail: "an answer the console cannot read: " + err.Error()}
	}
	return nil
}

// refusal reads a problem body (RFC 9457) into a callError.
func refusal(service string, status int, body []byte) *callError {
	var p problem.Details
	if json.Unmarshal(body, &p) == nil && (p.Detail != "" || p.Title != "") {
		detail := p.Detail
		if detail == "" {
			detail = p.Title
		}
		return &callError{Service: service, Status: status, Detail: detail}
	}
	return &callError{Service: service, Status: status, Detail: http.StatusText(status)}
}

// escape is a path segment.
func escape(s string) string { return url.PathEscape(s) }
