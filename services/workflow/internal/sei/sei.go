// Package sei registers requests in SEI (Sistema Eletrônico de
// Informações), the electronic protocol system of Brazilian public
// administration, through an HTTP gateway that speaks JSON:
//
//	POST {SEI_URL}/registrations
//	Idempotency-Key: <request id>
//	{"tenantId": "org-a", "requestId": "<uuid>", "unit": "SEMURB"}
//
//	201 Created (or 200 for a key it has seen)  {"seiNumber": "23106.000042/2026-17"}
//	4xx  RFC 9457 problem: SEI refuses the registration
//
// The request id is the idempotency key: a retried call after a timeout
// (SEI may have registered the request and answered too late) gets the
// number of the first, never a second registration.
//
// Errors carry the fabric's failure classes, so a consumer can return them
// as they are: a timeout, a refused or broken connection, 502, 503 and 504
// wrap fabric.ErrUnavailable (SEI or the way to it is down: the consumer
// keeps the command, in order, and calls again however long SEI stays
// down, never spending a retry tier or reaching the DLQ); 408, 429 and
// other 5xx are fabric.Transient (this call failed: retry later); any
// other 4xx is fabric.Permanent around a *RejectedError (SEI said no:
// retrying the same request cannot change that); anything else (a 2xx
// without a usable number, a redirect) is left unclassified, so it is
// retried a few times and then dead-lettered.
package sei

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/text"
)

// ReasonRejected is the dead-letter reason of a registration SEI refused.
const ReasonRejected = "SEI_REJECTED"

// DefaultTimeout bounds one call to SEI (SEI_TIMEOUT).
const DefaultTimeout = 5 * time.Second

const (
	// maxBody bounds what is read of an answer: a number or a problem.
	maxBody = 64 << 10
	// maxNumber bounds an SEI number (they look like 23106.000042/2026-17).
	maxNumber = 64
	// maxReason bounds the reason kept from a refusal, in bytes.
	maxReason = 500
)

// Client calls the SEI gateway at one base URL.
type Client struct {
	endpoint string
	timeout  time.Duration
	http     *http.Client
}

// New returns a client of the gateway at baseURL (an absolute http or
// https URL); timeout bounds each call.
func New(baseURL string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sei: %q is not an absolute http or https URL", baseURL)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("sei: timeout %s: want a positive duration", timeout)
	}
	return &Client{
		endpoint: u.JoinPath("registrations").String(),
		timeout:  timeout,
		http: &http.Client{
			// A redirect of a POST turns into a GET on the way: never
			// follow one, report it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// RejectedError is SEI refusing a registration (a 4xx other than 408 and
// 429), with its reason.
type RejectedError struct {
	Status int
	Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("SEI refused the registration (%d %s): %s", e.Status, http.StatusText(e.Status), e.Reason)
}

type registration struct {
	TenantID  string `json:"tenantId"`
	RequestID string `json:"requestId"`
	Unit      string `json:"unit,omitempty"`
}

// Register registers requestID of tenantID in SEI under unit (empty: SEI's
// choice) and returns the SEI number. Errors are classified as the package
// documentation says.
func (c *Client) Register(ctx context.Context, tenantID, requestID, unit string) (string, error) {
	body, err := json.Marshal(registration{TenantID: tenantID, RequestID: requestID, Unit: unit})
	if err != nil {
		return "", fmt.Errorf("sei register %s: %w", requestID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("sei register %s: %w", requestID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("Idempotency-Key", requestID)
	resp, err := c.http.Do(req)
	if err != nil {
		// Refused, reset, DNS, TLS, or no answer within the timeout: SEI
		// or the way to it is down. A timeout may hide a registration SEI
		// did make; the idempotency key makes the retry safe.
		return "", fmt.Errorf("sei register %s: %w: %w", requestID, fabric.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", fabric.Transient(fmt.Errorf("sei register %s: read the answer (%s): %w", requestID, resp.Status, err))
	}
	switch s := resp.StatusCode; {
	case s == http.StatusOK || s == http.StatusCreated:
		var out struct {
			SEINumber string `json:"seiNumber"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			return "", fmt.Errorf("sei register %s: %s with a body that is no registration: %w", requestID, resp.Status, err)
		}
		if !usableNumber(out.SEINumber) {
			return "", fmt.Errorf("sei register %s: %s without a usable seiNumber (%q)", requestID, resp.Status, text.Truncate(out.SEINumber, maxNumber))
		}
		return out.SEINumber, nil
	case s == http.StatusBadGateway || s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout:
		return "", fmt.Errorf("sei register %s: %w: %s: %s", requestID, fabric.ErrUnavailable, resp.Status, reason(resp, data))
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return "", fabric.Transient(fmt.Errorf("sei register %s: %s: %s", requestID, resp.Status, reason(resp, data)))
	case s >= 400:
		rej := &RejectedError{Status: s, Reason: reason(resp, data)}
		return "", fabric.Permanent(fabric.WithReason(fmt.Errorf("sei register %s: %w", requestID, rej), ReasonRejected))
	default:
		return "", fmt.Errorf("sei register %s: unexpected %s", requestID, resp.Status)
	}
}

// usableNumber accepts what can be shown and stored: printable, bounded.
func usableNumber(n string) bool {
	if n == "" || len(n) > maxNumber || !utf8.ValidString(n) {
		return false
	}
	return strings.IndexFunc(n, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}

// reason is what an error answer says: a problem's detail (or title), else
// the body as text, else the status.
func reason(resp *http.Response, data []byte) string {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); strings.HasSuffix(mt, "json") {
		var p struct{ Title, Detail string }
		if json.Unmarshal(data, &p) == nil {
			if p.Detail != "" {
				return text.Truncate(p.Detail, maxReason)
			}
			if p.Title != "" {
				return text.Truncate(p.Title, maxReason)
			}
		}
	}
	if s := strings.TrimSpace(string(data)); s != "" {
		return text.Truncate(s, maxReason)
	}
	return resp.Status
}
