package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/keyset"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

// History page sizes and the most types one call may name.
const (
	DefaultHistoryLimit = 500
	MaxHistoryLimit     = 1000
	maxHistoryTypes     = 100
)

// The widest range of occurredAt: every time RFC 3339 can write (years
// 0000 to 9999), which is every time an envelope can carry.
var (
	minTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// historyPage is the body of GET /v1/history: envelopes as the fabric
// encodes them, and the cursor of the next page ("" on the last).
type historyPage struct {
	Events []json.RawMessage `json:"events"`
	Next   string            `json:"next"`
}

// handleHistory serves GET /v1/history: the stored events of the caller's
// tenant, oldest first by (occurredAt, id), selected by ?type= (repeatable),
// ?correlationId=, ?from= and ?to= (from ≤ occurredAt < to), paged by
// ?limit= and ?after= (the previous page's next).
func handleHistory(hist History, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		q, bad := parseHistoryQuery(r.URL.RawQuery)
		if len(bad) > 0 {
			problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: "invalid query parameters", Errors: bad})
			return
		}
		page, err := hist.Page(r.Context(), claims.TenantID, q)
		if err != nil {
			log.Error("history page", "tenant", claims.TenantID, "err", err)
			problem.Fail(w, r, nil, err)
			return
		}
		body := historyPage{Events: make([]json.RawMessage, 0, len(page.Events))}
		for _, e := range page.Events {
			b, err := e.Encode()
			if err != nil {
				log.Error("history page: encode envelope", "tenant", claims.TenantID, "event", e.ID, "err", err)
				problem.Fail(w, r, nil, err)
				return
			}
			body.Events = append(body.Events, b)
		}
		if page.Next != nil {
			body.Next = encodeHistoryCursor(*page.Next)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // the envelopes go out as Encode wrote them
		_ = enc.Encode(body)
	}
}

// parseHistoryQuery reads GET /v1/history's query; bad maps each parameter
// that is wrong to why. Unknown parameters are refused, so a misspelt
// filter cannot widen a replay to the tenant's whole history, and so is a
// single-valued parameter given twice.
func parseHistoryQuery(raw string) (postgres.HistoryQuery, map[string]any) {
	q := postgres.HistoryQuery{From: minTime, To: maxTime, Limit: DefaultHistoryLimit}
	bad := map[string]any{}
	values, err := url.ParseQuery(raw)
	if err != nil {
		bad["query"] = "is not a well-formed query string"
		return q, bad
	}
	one := func(name string) (string, bool) {
		v, ok := values[name]
		if !ok {
			return "", false
		}
		if len(v) > 1 {
			bad[name] = "must be given once"
			return "", false
		}
		return v[0], true
	}
	for name := range values {
		switch name {
		case "type", "correlationId", "from", "to", "after", "limit":
		default:
			bad[name] = "is not a parameter of this route (type, correlationId, from, to, after, limit)"
		}
	}
	seen := map[string]bool{}
	for _, t := range values["type"] {
		if !envelope.ValidType(t) {
			bad["type"] = fmt.Sprintf("%q is not an event type (<domain>.<name>.v<N>)", t)
			break
		}
		if !seen[t] {
			seen[t] = true
			q.Types = append(q.Types, t)
		}
	}
	if len(q.Types) > maxHistoryTypes {
		bad["type"] = fmt.Sprintf("at most %d types", maxHistoryTypes)
	}
	if v, ok := one("correlationId"); ok {
		if id, err := uuid.Parse(v); err != nil {
			bad["correlationId"] = "must be a UUID"
		} else {
			q.CorrelationID = id.String() // the spelling envelopes carry
		}
	}
	var from, to bool
	if v, ok := one("from"); ok {
		if t, err := parseTime(v); err != nil {
			bad["from"] = err.Error()
		} else {
			q.From, from = t, true
		}
	}
	if v, ok := one("to"); ok {
		if t, err := parseTime(v); err != nil {
			bad["to"] = err.Error()
		} else {
			q.To, to = t, true
		}
	}
	if from && to && q.To.Before(q.From) {
		bad["to"] = "must not be before from"
	}
	if v, ok := one("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxHistoryLimit {
			bad["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxHistoryLimit)
		}
		q.Limit = n
	}
	if v, ok := one("after"); ok {
		pos, err := decodeHistoryCursor(v)
		if err != nil {
			bad["after"] = "is not a cursor this API returned"
		}
		q.After = pos
	}
	return q, bad
}

// parseTime reads an RFC 3339 time, rounded up to the microsecond (the
// lineage's precision): for a stored time t, t ≥ x and t < x both hold
// exactly when they hold for x rounded up.
func parseTime(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errors.New("must be an RFC 3339 time, e.g. 2026-03-10T14:00:00Z (a + offset written %2B)")
	}
	t = t.UTC()
	if r := t.Truncate(time.Microsecond); !r.Equal(t) {
		t = r.Add(time.Microsecond)
	}
	return t, nil
}

// A history cursor is the position of a page's last event (package
// keyset), within the range the lineage table can hold.
func encodeHistoryCursor(p postgres.Position) string {
	return keyset.Encode(keyset.Position{At: p.OccurredAt, ID: p.EventID})
}

func decodeHistoryCursor(s string) (*postgres.Position, error) {
	p, err := keyset.Decode(s)
	if err != nil {
		return nil, err
	}
	if p.At.Before(minTime) || !p.At.Before(maxTime) {
		return nil, errors.New("cursor: no position")
	}
	return &postgres.Position{OccurredAt: p.At, EventID: p.ID}, nil
}
