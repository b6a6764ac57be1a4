package httpapi

import (
	"encoding/base64"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

func TestParseHistoryQuery(t *testing.T) {
	at := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
	cursor := encodeHistoryCursor(postgres.Position{OccurredAt: at.Add(1500 * time.Nanosecond).Truncate(time.Microsecond),
		EventID: "0198a3c4-0000-7000-8000-000000000001"})
	ok := []struct {
		name, query string
		want        postgres.HistoryQuery
	}{
		{"defaults", "", postgres.HistoryQuery{From: minTime, To: maxTime, Limit: 500}},
		{"everything", "type=request.submitted.v1&type=document.uploaded.v1&type=request.submitted.v1" +
			"&correlationId=0198A3C4-0000-7000-8000-00000000000A&from=2026-03-10T16:00:00%2B02:00&to=2026-03-11T00:00:00Z" +
			"&limit=1000&after=" + cursor,
			postgres.HistoryQuery{Types: []string{"request.submitted.v1", "document.uploaded.v1"},
				CorrelationID: "0198a3c4-0000-7000-8000-00000000000a", From: at, To: at.Add(10 * time.Hour), Limit: 1000,
				After: &postgres.Position{OccurredAt: at.Add(time.Microsecond), EventID: "0198a3c4-0000-7000-8000-000000000001"}}},
		{"sub-microsecond bounds round up", "from=2026-03-10T14:00:00.0000001Z&to=2026-03-10T14:00:00.000001Z&limit=1",
			postgres.HistoryQuery{From: at.Add(time.Microsecond), To: at.Add(time.Microsecond), Limit: 1}},
		{"empty range", "from=2026-03-10T14:00:00Z&to=2026-03-10T14:00:00Z",
			postgres.HistoryQuery{From: at, To: at, Limit: 500}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := parseHistoryQuery(tc.query)
			if len(bad) > 0 {
				t.Fatalf("refused: %v", bad)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("query = %+v (after %+v), want %+v (after %+v)", got, got.After, tc.want, tc.want.After)
			}
		})
	}

	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	refused := []struct{ query, param string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=ten", "limit"}, {"limit=", "limit"}, {"limit=5&limit=5", "limit"},
		{"from=yesterday", "from"}, {"from=2026-03-10", "from"}, {"from=2026-03-10T14:00:00+02:00", "from"}, // + is a space
		{"to=2026-13-01T00:00:00Z", "to"}, {"from=2026-03-10T14:00:00Z&to=2026-03-10T13:59:59Z", "to"},
		{"correlationId=nope", "correlationId"}, {"correlationId=", "correlationId"},
		{"type=Request.Submitted", "type"}, {"type=", "type"}, {"type=request.submitted", "type"},
		{"after=!!", "after"}, {"after=" + b64(`{"t":"2026-03-10T14:00:00Z"}`), "after"},
		{"after=" + b64(`{"t":"2026-03-10T14:00:00Z","id":"x"}`), "after"},
		{"after=" + b64(`{"id":"0198a3c4-0000-7000-8000-000000000001"}`), "after"},
		{"after=" + b64(`{"t":"2026-03-10T14:00:00Z","id":"0198a3c4-0000-7000-8000-000000000001","x":1}`), "after"},
		{"after=" + b64(`{"t":"2026-03-10T14:00:00Z","id":"0198a3c4-0000-7000-8000-000000000001"}{}`), "after"},
		{"after=" + cursor + "&after=" + cursor, "after"},
		{"tenantId=org-b", "tenantId"}, {"types=request.submitted.v1", "types"},
		{"a=%zz", "query"},
	}
	for _, tc := range refused {
		t.Run(tc.query, func(t *testing.T) {
			if _, bad := parseHistoryQuery(tc.query); bad[tc.param] == nil {
				t.Errorf("bad = %v, want %s refused", bad, tc.param)
			}
		})
	}
	many := url.Values{}
	for i := range maxHistoryTypes + 1 {
		many.Add("type", "request.t"+string(rune('a'+i%26))+string(rune('a'+i/26))+".v1")
	}
	if _, bad := parseHistoryQuery(many.Encode()); bad["type"] == nil {
		t.Errorf("%d types accepted", maxHistoryTypes+1)
	}
}

func TestHistoryCursorRoundTrip(t *testing.T) {
	p := postgres.Position{OccurredAt: time.Date(2026, 3, 10, 14, 0, 0, 123456000, time.UTC), EventID: "0198a3c4-0000-7000-8000-000000000001"}
	got, err := decodeHistoryCursor(encodeHistoryCursor(p))
	if err != nil {
		t.Fatal(err)
	}
	if !got.OccurredAt.Equal(p.OccurredAt) || got.EventID != p.EventID {
		t.Errorf("cursor round trip = %+v, want %+v", got, p)
	}
}
