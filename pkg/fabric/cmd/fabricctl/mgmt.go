package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// mgmtClient calls the RabbitMQ management HTTP API on one vhost, for what
// AMQP cannot do or see: policies, queue arguments, bindings.
type mgmtClient struct {
	base       string // e.g. http://127.0.0.1:15672
	user, pass string
	vhost      string
	http       *http.Client
}

// defaultMgmtURL is the local broker's management API.
const defaultMgmtURL = "http://127.0.0.1:15672"

// newMgmt reaches the management API at RABBITMQ_MGMT_URL (default
// http://127.0.0.1:15672) as the user of AMQP_URL, unless the management
// URL names its own (http://user:pass@host:15672), on AMQP_URL's vhost.
// Setting policies needs the administrator or policymaker tag, which the
// services' users do not have.
func newMgmt(getenv func(string) string) (*mgmtClient, error) {
	uri, err := amqp.ParseURI(amqpURL(getenv))
	if err != nil {
		return nil, fmt.Errorf("AMQP_URL: %w", err)
	}
	base := getenv("RABBITMQ_MGMT_URL")
	if base == "" {
		base = defaultMgmtURL
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("RABBITMQ_MGMT_URL %q is not an http(s) URL", base)
	}
	m := &mgmtClient{user: uri.Username, pass: uri.Password, vhost: uri.Vhost, http: &http.Client{Timeout: 30 * time.Second}}
	if u.User != nil {
		m.user = u.User.Username()
		m.pass, _ = u.User.Password()
		u.User = nil
	}
	m.base = strings.TrimSuffix(u.String(), "/")
	return m, nil
}

// do sends body as JSON and decodes the answer into out (when not nil).
func (m *mgmtClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, m.base+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(m.user, m.pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.http.Do(req)
	if err != nil {
		return fmt.Errorf("management API (RABBITMQ_MGMT_URL, the rabbitmq_management plugin): %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode >= 300 {
		return &mgmtError{Method: method, Path: path, Status: resp.StatusCode, Body: strings.TrimSpace(string(data))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("management API: %s %s: %w", method, path, err)
		}
	}
	return nil
}

// mgmtError is an answer of the management API other than 2xx.
type mgmtError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *mgmtError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = " (the AMQP_URL user needs the administrator or policymaker tag; services' users have neither)"
	}
	return fmt.Sprintf("management API: %s %s: %d %s%s", e.Method, e.Path, e.Status, e.Body, hint)
}

// path is /api/<kind>/<vhost>[/<name>...], escaped.
func (m *mgmtClient) path(kind string, names ...string) string {
	p := "/api/" + kind + "/" + url.PathEscape(m.vhost)
	for _, n := range names {
		p += "/" + url.PathEscape(n)
	}
	return p
}

// brokerPolicy is a policy as the management API lists and takes it.
type brokerPolicy struct {
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}

// policies lists the vhost's policies, or with operator its operator
// policies.
func (m *mgmtClient) policies(ctx context.Context, operator bool) ([]brokerPolicy, error) {
	kind := "policies"
	if operator {
		kind = "operator-policies"
	}
	var ps []brokerPolicy
	if err := m.do(ctx, http.MethodGet, m.path(kind), nil, &ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// putPolicy creates or replaces a policy.
func (m *mgmtClient) putPolicy(ctx context.Context, p brokerPolicy) error {
	return m.do(ctx, http.MethodPut, m.path("policies", p.Name), map[string]any{
		"pattern": p.Pattern, "apply-to": p.ApplyTo, "priority": p.Priority, "definition": p.Definition}, nil)
}

// brokerQueue is the part of a queue the management API lists that
// fabricctl reads.
type brokerQueue struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Arguments map[string]any `json:"arguments"`
}

// queues lists the vhost's queues by name.
func (m *mgmtClient) queues(ctx context.Context) (map[string]brokerQueue, error) {
	var qs []brokerQueue
	if err := m.do(ctx, http.MethodGet, m.path("queues")+"?columns=name,type,arguments", nil, &qs); err != nil {
		return nil, err
	}
	out := make(map[string]brokerQueue, len(qs))
	for _, q := range qs {
		out[q.Name] = q
	}
	return out, nil
}

// queueBindings lists the exchange bindings of a queue as "exchange key"
// (the default exchange's own binding left out).
func (m *mgmtClient) queueBindings(ctx context.Context, queue string) ([]string, error) {
	var bs []struct {
		Source     string `json:"source"`
		RoutingKey string `json:"routing_key"`
	}
	if err := m.do(ctx, http.MethodGet, m.path("queues", queue, "bindings"), nil, &bs); err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bs {
		if b.Source != "" {
			out = append(out, b.Source+" "+b.RoutingKey)
		}
	}
	return out, nil
}
