package observability_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agora-platform/agora/deploy/observability"
)

const panelsDashboard = `{
  "templating": {"list": [
    {"name": "service", "current": {"value": "request"}},
    {"name": "queue", "current": {"value": ["a.b", "c"]}},
    {"name": "tenant", "allValue": "org-.+", "current": {"value": ["$__all"]}},
    {"name": "consumer", "current": {"value": "$__all"}}
  ]},
  "panels": [
    {"title": "rate", "targets": [
      {"refId": "A", "expr": "sum(rate(x_total{service=\"$service\"}[$__rate_interval]))"},
      {"refId": "B", "expr": "sum(rate(y_total[${__interval}]))"}
    ]},
    {"title": "a row", "type": "row", "panels": [
      {"title": "depth", "targets": [{"refId": "A", "expr": "depth{queue=~\"$queue\", tenant=~\"${tenant}\"}"}]}
    ]},
    {"title": "text, no queries"},
    {"title": "empty", "targets": [{"refId": "A", "expr": "nothing"}]},
    {"title": "broken", "targets": [{"refId": "A", "expr": "sum(", "datasource": "x"}, {"refId": "B", "expr": "up"}]}
  ]
}`

func TestPanels(t *testing.T) {
	panels, err := observability.Panels([]byte(panelsDashboard))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range panels {
		var refs []string
		for _, q := range p.Queries {
			refs = append(refs, q.RefID)
		}
		got = append(got, p.Title+":"+strings.Join(refs, ","))
	}
	want := "rate:A,B | depth:A | empty:A | broken:A,B"
	if strings.Join(got, " | ") != want {
		t.Errorf("Panels = %s, want %s", strings.Join(got, " | "), want)
	}
}

func TestExpand(t *testing.T) {
	vars, err := observability.DashboardVariables([]byte(panelsDashboard))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"service": "request", "queue": `(a\.b|c)`, "tenant": "org-.+", "consumer": ".*"}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("variable %s = %q, want %q", k, vars[k], v)
		}
	}
	if len(vars) != len(want) {
		t.Errorf("variables %v, want %v", vars, want)
	}
	for expr, want := range map[string]string{
		`rate(x_total{service="$service"}[$__rate_interval])`: `rate(x_total{service="request"}[5m])`,
		`rate(x[${__interval}]) + rate(x[$__range])`:          `rate(x[1m]) + rate(x[1h])`,
		`d{queue=~"${queue}", c=~"$consumer"}`:                `d{queue=~"(a\.b|c)", c=~".*"}`,
		`rabbitmq_queue_messages{queue=~".*\\.dlq$"}`:         `rabbitmq_queue_messages{queue=~".*\\.dlq$"}`,
	} {
		got, err := observability.Expand(expr, vars)
		if err != nil || got != want {
			t.Errorf("Expand(%s) = %s, %v; want %s", expr, got, err, want)
		}
	}
	if _, err := observability.Expand(`x{a="$nope", b="${gone}"}`, vars); err == nil || !strings.Contains(err.Error(), "$nope, $gone") {
		t.Errorf("Expand with unknown variables: %v, want an error naming $nope and $gone", err)
	}
}

// fakePrometheus answers /api/v1/query from answers, keyed by the query; any other
// query is a bad_data error, as Prometheus answers PromQL it cannot parse.
func fakePrometheus(t *testing.T, answers map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.Method != http.MethodPost {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		q := r.PostFormValue("query")
		w.Header().Set("Content-Type", "application/json")
		data, ok := answers[q]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "cannot parse " + q})
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":` + data + `}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestInstantQuery(t *testing.T) {
	srv := fakePrometheus(t, map[string]string{
		"two":      `{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"0"]},{"metric":{"a":"2"},"value":[1,"3.5"]}]}`,
		"nan":      `{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]},{"metric":{"a":"2"},"value":[1,"+Inf"]}]}`,
		"none":     `{"resultType":"vector","result":[]}`,
		"range":    `{"resultType":"matrix","result":[{"metric":{},"values":[[1,"NaN"],[2,"1"]]},{"metric":{"b":"1"},"values":[[1,"NaN"]]}]}`,
		"scalar":   `{"resultType":"scalar","result":[1,"42"]}`,
		"scalarNa": `{"resultType":"scalar","result":[1,"NaN"]}`,
		"odd":      `{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}`,
	})
	ctx := context.Background()
	for q, want := range map[string]int{"two": 2, "nan": 1, "none": 0, "range": 1, "scalar": 1, "scalarNa": 0} {
		got, err := observability.InstantQuery(ctx, srv.Client(), srv.URL+"/", q)
		if err != nil || got != want {
			t.Errorf("InstantQuery(%s) = %d, %v; want %d", q, got, err, want)
		}
	}
	if _, err := observability.InstantQuery(ctx, srv.Client(), srv.URL, "odd"); err == nil {
		t.Error("a sample value that is not a number: no error")
	}
	if _, err := observability.InstantQuery(ctx, srv.Client(), srv.URL, "sum("); err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("a query Prometheus refuses: %v, want its bad_data error", err)
	}
	if _, err := observability.InstantQuery(ctx, srv.Client(), srv.URL+"/elsewhere", "two"); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("not Prometheus's API: %v, want an error naming HTTP 404", err)
	}
}

func TestQueryPanels(t *testing.T) {
	srv := fakePrometheus(t, map[string]string{
		`sum(rate(x_total{service="request"}[5m]))`:  `{"resultType":"vector","result":[]}`,
		`sum(rate(y_total[1m]))`:                     `{"resultType":"vector","result":[{"metric":{},"value":[1,"0"]}]}`,
		`depth{queue=~"(a\.b|c)", tenant=~"org-.+"}`: `{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}`,
		`nothing`: `{"resultType":"vector","result":[]}`,
		`up`:      `{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}`,
	})
	got, err := observability.QueryPanels(context.Background(), srv.Client(), srv.URL, []byte(panelsDashboard))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		title string
		empty bool
		err   string
	}{
		{"rate", false, ""}, // a zero rate of a series that exists is data
		{"depth", true, ""}, // NaN only
		{"empty", true, ""},
		{"broken", false, "query A: "},
	}
	if len(got) != len(want) {
		t.Fatalf("QueryPanels returned %d panels, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Title != w.title || g.Empty() != w.empty {
			t.Errorf("panel %d: %s empty=%v (%v), want %s empty=%v", i, g.Title, g.Empty(), g.Series, w.title, w.empty)
		}
		if (g.Err == nil) != (w.err == "") || (g.Err != nil && !strings.Contains(g.Err.Error(), w.err)) {
			t.Errorf("panel %s: err %v, want %q", g.Title, g.Err, w.err)
		}
	}
}
