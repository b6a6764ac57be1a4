package httpspan_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agora-platform/agora/pkg/fabric/telemetry/httpspan"
)

// TestRouteNamerNamesTheSpanAfterTheRoute: the server span is named after
// the pattern the router matched, never the raw path (it carries ids), and
// keeps the method's name when no route matched.
func TestRouteNamerNamesTheSpanAfterTheRoute(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {})
	h := httpspan.Server(tp)(httpspan.RouteNamer(mux))

	for _, path := range []string{"/v1/things/0190a0b0-0000-7000-8000-000000000000", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if got := spans[0].Name(); got != "GET /v1/things/{id}" {
		t.Errorf("span of a matched route = %q, want %q", got, "GET /v1/things/{id}")
	}
	var route string
	for _, a := range spans[0].Attributes() {
		if a.Key == attribute.Key("http.route") {
			route = a.Value.AsString()
		}
	}
	if route != "/v1/things/{id}" {
		t.Errorf("http.route = %q, want the pattern", route)
	}
	if got := spans[1].Name(); got != http.MethodGet {
		t.Errorf("span of an unmatched path = %q, want %q", got, http.MethodGet)
	}
}
