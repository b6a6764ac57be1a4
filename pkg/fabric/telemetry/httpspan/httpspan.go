// Package httpspan traces a service's HTTP API: a server span per request,
// continuing the caller's traceparent, named after the route the router
// matched (never the raw path, which carries ids). The service host wraps
// every API with Server; a service's router names its routes with
// RouteNamer.
package httpspan

import (
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// Server returns middleware that starts a server span per request,
// continuing a caller's traceparent. The outbox copies the span's context
// into the events a request enqueues, so consumers' spans join this trace.
// The span is named after the method until a router inside names the route
// (RouteNamer): span names must not carry ids.
func Server(tp trace.TracerProvider) func(http.Handler) http.Handler {
	tracer := tp.Tracer("github.com/agora-platform/agora/pkg/fabric/telemetry/httpspan")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := telemetry.Propagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
			defer span.End()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			r = r.WithContext(ctx)
			next.ServeHTTP(sw, r)
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
			if sw.status >= 500 {
				span.SetStatus(codes.Error, fmt.Sprintf("HTTP %d", sw.status))
			}
		})
	}
}

// RouteNamer is router middleware that, once the handler ran, names the
// current server span after the route pattern the router matched
// (http.Request.Pattern, which net/http's ServeMux and chi both set on the
// request they route), so no service has to know where its router keeps
// it. A ServeMux pattern's method ("GET /v1/x") is left out: the span
// names it already, and http.route is the path alone. It goes inside the
// router, where the pattern is known; Server wraps the router.
func RouteNamer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		p := r.Pattern
		if _, path, ok := strings.Cut(p, " "); ok {
			p = path
		}
		if p != "" {
			span := trace.SpanFromContext(r.Context())
			span.SetName(r.Method + " " + p)
			span.SetAttributes(attribute.String("http.route", p))
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
