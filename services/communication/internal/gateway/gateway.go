// Package gateway sends SMS and WhatsApp messages through an HTTP gateway
// that speaks JSON, one URL per channel (SMS_GATEWAY_URL,
// WHATSAPP_GATEWAY_URL):
//
//	POST {URL}
//	Content-Type: application/json
//	Idempotency-Key: <notification id>
//	Authorization: Bearer <token>        (when a token is configured)
//	{"channel": "sms", "to": "+5511999990000", "subject": "Request received: protocol AGR-…",
//	 "text": "We received your request.\n…", "notificationId": "<uuid>", "requestId": "<uuid>"}
//
//	2xx            accepted; a key it has accepted before answers as the first time
//	409 Conflict   the key was accepted before: accepted
//	408, 429, 5xx  try again later (so do a timeout, a refused or broken connection)
//	other 4xx      refused for good: the error wraps notify.ErrRejected
//	anything else  (a redirect, 1xx) try again later
//
// The idempotency key is the notification id (notify.Message.IdempotencyKey),
// the same on every send of one notification: a gateway that honours it
// sends a message once however often it is asked. A timeout may hide a
// message the gateway accepted; the retry carries the same key and is
// answered as accepted, never sent twice.
package gateway

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

	"github.com/agora-platform/agora/pkg/fabric/text"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// DefaultTimeout bounds one call to a gateway (GATEWAY_TIMEOUT).
const DefaultTimeout = 10 * time.Second

const (
	// maxBody bounds what is read of an answer, which is only classified.
	maxBody = 64 << 10
	// maxTitle bounds the problem title kept from a refusal.
	maxTitle = 200
)

// Config locates one channel's gateway.
type Config struct {
	URL     string        // absolute http or https URL the messages are POSTed to
	Token   string        // sent as a bearer token when set
	Timeout time.Duration // bound of one call (default DefaultTimeout)
}

// Sender sends one channel's messages to its gateway. It is safe for
// concurrent use.
type Sender struct {
	channel notify.Channel
	url     string
	token   string
	timeout time.Duration
	http    *http.Client
}

// New returns the sender of channel's messages to the gateway of cfg.
func New(channel notify.Channel, cfg Config) (*Sender, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s gateway: %q is not an absolute http or https URL", channel, cfg.URL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%s gateway: timeout %s: want a positive duration", channel, cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Sender{channel: channel, url: u.String(), token: cfg.Token, timeout: cfg.Timeout, http: &http.Client{
		// A redirect of a POST turns into a GET on the way: never follow
		// one, report it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// request is the JSON body of a send.
type request struct {
	Channel        notify.Channel `json:"channel"`
	To             string         `json:"to"`
	Subject        string         `json:"subject"`
	Text           string         `json:"text"`
	NotificationID string         `json:"notificationId"`
	RequestID      string         `json:"requestId,omitempty"`
}

// Send posts m to the gateway with m's idempotency key. A refusal wraps
// notify.ErrRejected; any other error means "try again later". Errors
// never carry the address (personal data): they are logged and stored.
func (s *Sender) Send(ctx context.Context, m notify.Message) error {
	body, err := json.Marshal(request{Channel: s.channel, To: m.To, Subject: m.Subject,
		Text: strings.ReplaceAll(m.Body, "\r\n", "\n"), NotificationID: m.NotificationID, RequestID: m.RequestID})
	if err != nil {
		return fmt.Errorf("%s gateway: notification %s: %w", s.channel, m.NotificationID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s gateway: notification %s: %w", s.channel, m.NotificationID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("Idempotency-Key", m.IdempotencyKey())
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		// Refused, reset, DNS, TLS, or no answer in time: the gateway or
		// the way to it is down. A timeout may hide an acceptance; the
		// retry's key, the same, makes it safe.
		return fmt.Errorf("%s gateway: notification %s: %w", s.channel, m.NotificationID, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return s.classify(m.NotificationID, resp, data)
}

// classify turns the gateway's answer into Send's error.
func (s *Sender) classify(id string, resp *http.Response, data []byte) error {
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300, c == http.StatusConflict:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return fmt.Errorf("%s gateway: notification %s: %s", s.channel, id, answer(resp, data))
	case c >= 400:
		return fmt.Errorf("%w: %s gateway: notification %s: %s", notify.ErrRejected, s.channel, id, answer(resp, data))
	default:
		return fmt.Errorf("%s gateway: notification %s: unexpected %s", s.channel, id, resp.Status)
	}
}

// answer is the status of an error answer, with its problem's title when
// it is one. Not the detail, nor the body as text: they may quote the
// number the message was for, and the error is logged and stored.
func answer(resp *http.Response, data []byte) string {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); strings.HasSuffix(mt, "json") {
		var p struct{ Title string }
		if json.Unmarshal(data, &p) == nil && p.Title != "" {
			return resp.Status + " " + text.Truncate(p.Title, maxTitle)
		}
	}
	return resp.Status
}
