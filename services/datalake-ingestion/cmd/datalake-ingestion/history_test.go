package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// historyPage is GET /v1/history's answer, as a client reads it.
type historyPage struct {
	Events []json.RawMessage `json:"events"`
	Next   *string           `json:"next"` // a pointer, to tell absent from ""
}

// history calls GET /v1/history?query with token and returns the page, the
// status and, for a 200, the raw body.
func (s *stack) history(t *testing.T, token, query string) (historyPage, int) {
	t.Helper()
	resp := deploytest.Do(t, http.MethodGet, s.url+"/v1/history?"+query, token, nil, nil)
	var p historyPage
	if resp.Status != http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("GET /v1/history?%s: %d with Content-Type %q, want a problem", query, resp.Status, ct)
		}
		return p, resp.Status
	}
	dec := json.NewDecoder(bytes.NewReader(resp.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("GET /v1/history?%s: %v", query, err)
	}
	if p.Events == nil || p.Next == nil {
		t.Fatalf("GET /v1/history?%s: events or next missing (events must be [] when empty, next \"\")", query)
	}
	return p, resp.Status
}

// historyAll reads every page of the selection query with pages of limit,
// checking each page's size, and returns the events, each decoded as a
// consumer does (strictly).
func (s *stack) historyAll(t *testing.T, token, query string, limit int) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	after := ""
	for pages := 1; ; pages++ {
		q := query + "&limit=" + strconv.Itoa(limit)
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		p, code := s.history(t, token, q)
		if code != http.StatusOK {
			t.Fatalf("GET /v1/history?%s = %d", q, code)
		}
		if len(p.Events) > limit {
			t.Fatalf("page %d of %q: %d events, limit %d", pages, query, len(p.Events), limit)
		}
		for _, raw := range p.Events {
			e, err := envelope.Decode(raw, 0)
			if err != nil {
				t.Fatalf("page %d of %q: envelope.Decode(%s): %v", pages, query, raw, err)
			}
			if err := e.ValidateIncoming(true); err != nil {
				t.Errorf("page %d of %q: event %s does not validate: %v", pages, query, e.ID, err)
			}
			out = append(out, e)
		}
		if *p.Next == "" {
			return out
		}
		if len(p.Events) != limit {
			t.Fatalf("page %d of %q: %d events and a next page, want a full page of %d", pages, query, len(p.Events), limit)
		}
		if pages > 200 {
			t.Fatalf("%q: more than 200 pages of %d", query, limit)
		}
		after = *p.Next
	}
}

// sendEvent publishes e as the fabric would, extensions included (this
// build's publisher refuses to write fields it does not know, so the body
// is the full envelope's and the rest the publisher's own message).
func (s *stack) sendEvent(t *testing.T, reg *registry.Registry, e envelope.Envelope) {
	t.Helper()
	bare := e
	bare.Extensions = nil
	m, err := broker.EnvelopeMessage(reg, bare)
	if err != nil {
		t.Fatal(err)
	}
	if m.Body, err = e.Encode(); err != nil {
		t.Fatal(err)
	}
	pd, err := s.Pub.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// payloadOf returns a valid payload of typ.
func payloadOf(typ string, i int) map[string]any {
	at := time.Now().UTC().Format(time.RFC3339)
	switch typ {
	case "request.submitted.v1":
		return map[string]any{"requestId": uuid.NewString(), "protocol": fmt.Sprintf("AG-HIST%02d", i), "serviceId": "iptu",
			"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c-1", "submittedAt": at}
	case "request.status-changed.v1":
		return map[string]any{"requestId": uuid.NewString(), "status": "in_progress", "reason": "<é & ü>", "changedAt": at}
	case "request.cancelled.v1":
		return map[string]any{"requestId": uuid.NewString(), "previousStatus": "submitted", "cancelledBy": "c-1", "cancelledAt": at}
	default: // document.uploaded.v1
		return map[string]any{"documentId": uuid.NewString(), "requestId": uuid.NewString(), "objectKey": "docs/" + strconv.Itoa(i),
			"contentType": "application/pdf", "size": i, "sha256": strings.Repeat("ab", 32)}
	}
}

// sameEvent reports how got, read back from the history, differs from
// want, the event published: it must be the same but for the causation
// chain, which the lake does not keep.
func sameEvent(got, want envelope.Envelope) string {
	var diffs []string
	if got.ID != want.ID || got.Type != want.Type || got.Version != want.Version || got.SchemaVersion != want.SchemaVersion ||
		got.TenantID != want.TenantID || got.CorrelationID != want.CorrelationID || got.CausationID != want.CausationID ||
		got.Producer != want.Producer || !got.OccurredAt.Equal(want.OccurredAt) {
		diffs = append(diffs, fmt.Sprintf("envelope fields %+v, want %+v", got, want))
	}
	if len(got.CausationChain) != 0 {
		diffs = append(diffs, "a causation chain, which the lake does not keep")
	}
	var gp, wp bytes.Buffer
	if json.Compact(&gp, got.Payload) != nil || json.Compact(&wp, want.Payload) != nil || gp.String() != wp.String() {
		diffs = append(diffs, fmt.Sprintf("payload %s, want %s", got.Payload, want.Payload))
	}
	norm := func(ext map[string]json.RawMessage) map[string]any {
		out := map[string]any{}
		for k, v := range ext {
			var x any
			_ = json.Unmarshal(v, &x)
			out[k] = x
		}
		return out
	}
	if !reflect.DeepEqual(norm(got.Extensions), norm(want.Extensions)) {
		diffs = append(diffs, fmt.Sprintf("extensions %v, want %v", got.Extensions, want.Extensions))
	}
	return strings.Join(diffs, "; ")
}

// TestHistory: events of two tenants, of four types (two domains, so both
// queues), three correlations, some caused by others and some carrying
// envelope fields of a newer producer, spread over three days with three
// events at each instant (so pages split ties on occurredAt), ingested by
// the running service. The history returns each tenant exactly its own
// events, selected by type, correlation and time range, in (occurredAt,
// id) order, page after page with no event twice and none missing, each
// one the envelope that was published.
func TestHistory(t *testing.T) {
	s := startStack(t, nil)
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	types := []string{"request.submitted.v1", "request.status-changed.v1", "request.cancelled.v1", "document.uploaded.v1"}
	corrs := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	base := time.Now().UTC().Add(-72 * time.Hour).Truncate(time.Hour).Add(123 * time.Millisecond)
	at := func(k int) time.Time { return base.Add(time.Duration(k) * 7 * time.Hour) }
	var published []envelope.Envelope
	for _, tc := range []struct {
		tenant string
		n      int
	}{{"org-a", 18}, {"org-b", 7}} {
		var prev envelope.Envelope
		for i := range tc.n {
			typ := types[i%len(types)]
			e, err := envelope.New(typ, tc.tenant, "request-service", payloadOf(typ, i))
			if err != nil {
				t.Fatal(err)
			}
			e.OccurredAt = at(i / 3)
			e.CorrelationID = corrs[i%len(corrs)]
			if i%2 == 1 { // a reaction to the previous event
				e.CausationID = prev.ID
				e.CausationChain = []envelope.Ref{{Type: prev.Type, ID: prev.ID}}
			}
			if i%5 == 0 {
				e.Extensions = map[string]json.RawMessage{"x-origin": json.RawMessage(`{"system":"sei","ids":[1,2]}`),
					"x-note": json.RawMessage(`"<a & b>"`)}
			}
			s.sendEvent(t, reg, e)
			published = append(published, e)
			prev = e
		}
	}
	operator := map[string]string{"org-a": s.Token(t, "org-a", "u-1", auth.RoleOperator), "org-b": s.Token(t, "org-b", "u-1", auth.RoleOperator)}
	landed := map[string]bool{}
	fabrictest.Eventually(t, 30*time.Second, "the lineage of every event", func() bool {
		for _, e := range published {
			if !landed[e.ID] {
				_, code := s.lineage(t, operator[e.TenantID], e.ID)
				landed[e.ID] = code == http.StatusOK
			}
		}
		for _, e := range published {
			if !landed[e.ID] {
				return false
			}
		}
		return true
	})

	// want returns tenant's published events that keep selects, in the
	// history's order.
	want := func(tenant string, keep func(envelope.Envelope) bool) []envelope.Envelope {
		var out []envelope.Envelope
		for _, e := range published {
			if e.TenantID == tenant && keep(e) {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, func(a, b envelope.Envelope) int {
			return cmp.Or(a.OccurredAt.Compare(b.OccurredAt), strings.Compare(a.ID, b.ID))
		})
		return out
	}
	check := func(t *testing.T, got, want []envelope.Envelope) {
		t.Helper()
		ids := func(es []envelope.Envelope) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.ID)
			}
			return out
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("history returned\n%v\nwant (no duplicate, no gap, in (occurredAt, id) order)\n%v", ids(got), ids(want))
		}
		for i := range got {
			if d := sameEvent(got[i], want[i]); d != "" {
				t.Errorf("event %s: %s", want[i].ID, d)
			}
		}
	}
	all := func(envelope.Envelope) bool { return true }
	rfc := func(tm time.Time) string { return url.QueryEscape(tm.Format(time.RFC3339Nano)) }

	selections := []struct {
		name, query string
		keep        func(envelope.Envelope) bool
	}{
		{"everything", "", all},
		{"one type", "type=request.submitted.v1", func(e envelope.Envelope) bool { return e.Type == "request.submitted.v1" }},
		{"two types", "type=request.cancelled.v1&type=document.uploaded.v1",
			func(e envelope.Envelope) bool {
				return e.Type == "request.cancelled.v1" || e.Type == "document.uploaded.v1"
			}},
		{"a type nobody published", "type=request.submitted.v2", func(envelope.Envelope) bool { return false }},
		{"a correlation", "correlationId=" + corrs[1], func(e envelope.Envelope) bool { return e.CorrelationID == corrs[1] }},
		{"a correlation, in capitals", "correlationId=" + strings.ToUpper(corrs[2]),
			func(e envelope.Envelope) bool { return e.CorrelationID == corrs[2] }},
		// from is an instant three events occurred at (kept), to one three
		// others did (left out).
		{"a time range", "from=" + rfc(at(1)) + "&to=" + rfc(at(4)),
			func(e envelope.Envelope) bool { return !e.OccurredAt.Before(at(1)) && e.OccurredAt.Before(at(4)) }},
		{"from only", "from=" + rfc(at(4).Add(time.Millisecond)), func(e envelope.Envelope) bool { return e.OccurredAt.After(at(4)) }},
		{"to only, in another offset", "to=" + url.QueryEscape(at(2).In(time.FixedZone("", -3*3600)).Format(time.RFC3339Nano)),
			func(e envelope.Envelope) bool { return e.OccurredAt.Before(at(2)) }},
		{"type, correlation and range", "type=request.submitted.v1&type=request.status-changed.v1&correlationId=" + corrs[0] +
			"&from=" + rfc(at(0)) + "&to=" + rfc(at(5)), func(e envelope.Envelope) bool {
			return (e.Type == "request.submitted.v1" || e.Type == "request.status-changed.v1") && e.CorrelationID == corrs[0] && e.OccurredAt.Before(at(5))
		}},
	}
	for _, tenant := range []string{"org-a", "org-b"} {
		for _, sel := range selections {
			w := want(tenant, sel.keep)
			// Pages of 1, of 2 (which split the three events of an
			// instant), of 3 (which end exactly on the last event: no
			// empty page after it) and one page of everything.
			for _, limit := range []int{1, 2, 3, 1000} {
				t.Run(fmt.Sprintf("%s/%s/limit=%d", tenant, sel.name, limit), func(t *testing.T) {
					check(t, s.historyAll(t, operator[tenant], sel.query, limit), w)
				})
			}
		}
	}
	if n := len(want("org-a", selections[6].keep)); n != 9 {
		t.Fatalf("the time range selects %d events, want 9 (the test's data changed?)", n)
	}

	t.Run("the default page is 500 and says there is no more", func(t *testing.T) {
		p, code := s.history(t, operator["org-a"], "")
		if code != http.StatusOK || len(p.Events) != 18 || *p.Next != "" {
			t.Errorf("GET /v1/history = %d, %d events, next %q; want 200, 18, \"\"", code, len(p.Events), *p.Next)
		}
	})
	t.Run("another tenant's cursor shows nothing of that tenant", func(t *testing.T) {
		p, _ := s.history(t, operator["org-a"], "limit=2")
		got, code := s.history(t, operator["org-b"], "limit=1000&after="+url.QueryEscape(*p.Next))
		if code != http.StatusOK || len(got.Events) == 0 {
			t.Fatalf("org-b after org-a's cursor = %d, %d events; want 200 and org-b's later events", code, len(got.Events))
		}
		for _, raw := range got.Events {
			if e, err := envelope.Decode(raw, 0); err != nil || e.TenantID != "org-b" {
				t.Errorf("org-b's history returned %s", raw)
			}
		}
	})

	refused := []struct {
		name, token, query string
		want               int
	}{
		{"limit 0", operator["org-a"], "limit=0", 400},
		{"limit 1001", operator["org-a"], "limit=1001", 400},
		{"limit not a number", operator["org-a"], "limit=ten", 400},
		{"from not a time", operator["org-a"], "from=yesterday", 400},
		{"to a date only", operator["org-a"], "to=2026-03-10", 400},
		{"to before from", operator["org-a"], "from=" + rfc(at(2)) + "&to=" + rfc(at(1)), 400},
		{"a cursor this API never returned", operator["org-a"], "after=bm90LWEtY3Vyc29y", 400},
		{"a cursor that is not base64", operator["org-a"], "after=%21%21", 400},
		{"correlationId not a UUID", operator["org-a"], "correlationId=c-1", 400},
		{"type not a type", operator["org-a"], "type=request", 400},
		{"a tenant parameter", operator["org-a"], "tenantId=org-b", 400},
		{"limit twice", operator["org-a"], "limit=1&limit=2", 400},
		{"no token", "", "", 401},
		{"an attendant", s.Token(t, "org-a", "u-1", auth.RoleAttendant), "", 403},
		{"a citizen", s.Token(t, "org-a", "u-1", auth.RoleCitizen), "", 403},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if _, code := s.history(t, tc.token, tc.query); code != tc.want {
				t.Errorf("GET /v1/history?%s = %d, want %d", tc.query, code, tc.want)
			}
		})
	}
}
