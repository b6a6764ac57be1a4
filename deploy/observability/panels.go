package observability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// What a dashboard panel shows is what its PromQL queries return from Prometheus.
// The functions below put each panel's queries to a live Prometheus (its HTTP API,
// /api/v1/query) and say which panels would stay empty; the compose test runs them
// after the e2e suites (panels_live_test.go).

// Panel is one dashboard panel that queries Prometheus, with its targets' queries
// as the dashboard writes them.
type Panel struct {
	Title   string
	Queries []Query
}

// Panels lists the dashboard's panels that have at least one PromQL target, in
// dashboard order, the panels of rows included.
func Panels(dashboardJSON []byte) ([]Panel, error) {
	queries, err := dashboardQueries(dashboardJSON)
	if err != nil {
		return nil, err
	}
	var out []Panel
	for _, q := range queries {
		// dashboardQueries lists a panel's targets one after the other.
		if n := len(out); n > 0 && out[n-1].Title == q.Panel {
			out[n-1].Queries = append(out[n-1].Queries, q)
			continue
		}
		out = append(out, Panel{Title: q.Panel, Queries: []Query{q}})
	}
	return out, nil
}

// DashboardVariables returns the current value of each of the dashboard's template
// variables (templating.list), formatted as Grafana puts it into a PromQL query: a
// single value as it is, several as a regular-expression alternation, "All" as the
// variable's allValue or ".*".
func DashboardVariables(dashboardJSON []byte) (map[string]string, error) {
	var d struct {
		Templating struct {
			List []struct {
				Name     string `json:"name"`
				AllValue string `json:"allValue"`
				Current  struct {
					Value json.RawMessage `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("observability: dashboard: %w", err)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		var values []string
		var one string
		switch {
		case len(v.Current.Value) == 0:
			continue
		case json.Unmarshal(v.Current.Value, &one) == nil:
			values = []string{one}
		case json.Unmarshal(v.Current.Value, &values) == nil:
		default:
			return nil, fmt.Errorf("observability: dashboard variable %s: current value %s is neither a string nor a list", v.Name, v.Current.Value)
		}
		if len(values) == 1 && values[0] == "$__all" {
			vars[v.Name] = ".*"
			if v.AllValue != "" {
				vars[v.Name] = v.AllValue
			}
			continue
		}
		if len(values) == 1 {
			vars[v.Name] = values[0]
			continue
		}
		for i, s := range values {
			values[i] = regexp.QuoteMeta(s)
		}
		vars[v.Name] = "(" + strings.Join(values, "|") + ")"
	}
	return vars, nil
}

var templateVariable = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// Expand makes a panel query plain PromQL: Grafana's range macros become the
// ranges MetricNames parses them with ($__rate_interval 5m, $__interval 1m,
// $__range 1h) and every other $name or ${name} the value vars gives it
// (DashboardVariables). A variable without a value is an error: the query would
// reach Prometheus malformed, or check something else than the panel shows.
func Expand(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := templateVariable.ReplaceAllStringFunc(expr, func(m string) string {
		sub := templateVariable.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		v, ok := grafanaMacroValues[name]
		if !ok {
			v, ok = vars[name]
		}
		if !ok {
			missing = append(missing, "$"+name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("observability: query %q: no value for %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}

// InstantQuery evaluates expr at the present moment on the Prometheus at baseURL
// (/api/v1/query) and returns how many series of the result carry a value. A NaN
// is no value: Grafana draws nothing for it (a quantile or a ratio over a window
// without observations). A matrix counts a series with any value; a scalar or a
// string counts as one series.
func InstantQuery(ctx context.Context, client *http.Client, baseURL, expr string) (int, error) {
	if client == nil {
		client = http.DefaultClient
	}
	u := strings.TrimRight(baseURL, "/") + "/api/v1/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(url.Values{"query": {expr}}.Encode()))
	if err != nil {
		return 0, fmt.Errorf("observability: query %s: %w", u, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("observability: query %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return 0, fmt.Errorf("observability: query %s: %w", u, err)
	}
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("observability: query %s: HTTP %d, not Prometheus's API answer: %.200s", u, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("observability: query %q: HTTP %d, %s: %s", expr, resp.StatusCode, r.ErrorType, r.Error)
	}
	return countValues(r.Data.ResultType, r.Data.Result)
}

// sampleValue is a [time, "value"] pair of Prometheus's API.
type sampleValue [2]json.RawMessage

func (s sampleValue) present() (bool, error) {
	var v string
	if err := json.Unmarshal(s[1], &v); err != nil {
		return false, fmt.Errorf("sample value %s: %w", s[1], err)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return false, fmt.Errorf("sample value %q: %w", v, err)
	}
	return !math.IsNaN(f), nil
}

func countValues(resultType string, result json.RawMessage) (int, error) {
	bad := func(err error) (int, error) {
		return 0, fmt.Errorf("observability: %s result: %w", resultType, err)
	}
	switch resultType {
	case "vector":
		var series []struct {
			Value sampleValue `json:"value"`
		}
		if err := json.Unmarshal(result, &series); err != nil {
			return bad(err)
		}
		n := 0
		for _, s := range series {
			ok, err := s.Value.present()
			if err != nil {
				return bad(err)
			}
			if ok {
				n++
			}
		}
		return n, nil
	case "matrix":
		var series []struct {
			Values []sampleValue `json:"values"`
		}
		if err := json.Unmarshal(result, &series); err != nil {
			return bad(err)
		}
		n := 0
		for _, s := range series {
			for _, v := range s.Values {
				ok, err := v.present()
				if err != nil {
					return bad(err)
				}
				if ok {
					n++
					break
				}
			}
		}
		return n, nil
	case "scalar":
		var v sampleValue
		if err := json.Unmarshal(result, &v); err != nil {
			return bad(err)
		}
		ok, err := v.present()
		if err != nil || !ok {
			return 0, err
		}
		return 1, nil
	case "string":
		return 1, nil
	}
	return bad(errors.New("unknown result type"))
}

// PanelData is what one panel's queries returned.
type PanelData struct {
	Title string
	// Series holds, per query (refId), how many series came back with a value.
	Series map[string]int
	// Err joins the queries that failed (bad PromQL, Prometheus unreachable).
	Err error
}

// Empty reports whether the panel would show nothing: none of its queries
// returned a series with a value.
func (p PanelData) Empty() bool {
	for _, n := range p.Series {
		if n > 0 {
			return false
		}
	}
	return true
}

// QueryPanels puts every query of every panel of the dashboard to the Prometheus at
// baseURL, with the dashboard's template variables at their current values
// (DashboardVariables, Expand), and returns what each panel got, in dashboard order.
// The error is for a dashboard that cannot be read; a failed query is in its
// panel's Err.
func QueryPanels(ctx context.Context, client *http.Client, baseURL string, dashboardJSON []byte) ([]PanelData, error) {
	panels, err := Panels(dashboardJSON)
	if err != nil {
		return nil, err
	}
	vars, err := DashboardVariables(dashboardJSON)
	if err != nil {
		return nil, err
	}
	out := make([]PanelData, 0, len(panels))
	for _, p := range panels {
		d := PanelData{Title: p.Title, Series: map[string]int{}}
		var errs []error
		for _, q := range p.Queries {
			expr, err := Expand(q.Expr, vars)
			if err == nil {
				d.Series[q.RefID], err = InstantQuery(ctx, client, baseURL, expr)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("query %s: %w", q.RefID, err))
			}
		}
		d.Err = errors.Join(errs...)
		out = append(out, d)
	}
	return out, nil
}
