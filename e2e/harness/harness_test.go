package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/agora-platform/agora/pkg/fabric/auth"
)

func TestMain(m *testing.M) { Main(m, os.Getenv) }

func TestNewGivesPrivateDatabaseVhostAndKeys(t *testing.T) {
	h := New(t, os.Getenv)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, h.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer c.Close(ctx)
	var db string
	var hasVector bool
	if err := c.QueryRow(ctx, "SELECT current_database(), EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')").Scan(&db, &hasVector); err != nil {
		t.Fatal(err)
	}
	if len(db) < len("agora_e2e_") || db[:len("agora_e2e_")] != "agora_e2e_" || !hasVector {
		t.Errorf("database = %q (vector %v), want agora_e2e_* with vector", db, hasVector)
	}
	var vhosts []struct{ Name string }
	if err := h.Vhost.Mgmt("GET", "/api/vhosts", nil, &vhosts); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range vhosts {
		found = found || v.Name == h.Vhost.Name
	}
	if !found {
		t.Errorf("vhost %s not on the broker", h.Vhost.Name)
	}

	keys, err := auth.LoadKeys(ctx, h.Keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := auth.NewVerifier(keys, auth.DevIssuer).Verify(h.Token("org-a", "citizen-1", "citizen"))
	if err != nil {
		t.Fatalf("Verify(Token) = %v", err)
	}
	if claims.TenantID != "org-a" || claims.Subject != "citizen-1" || !claims.Has("citizen") {
		t.Errorf("claims = %+v, want org-a/citizen-1/citizen", claims)
	}
}

func TestSpansReadsStdouttraceFiles(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "svc.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("svc"))))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	_, child := tp.Tracer("test").Start(ctx, "child")
	child.End()
	parent.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.Close()

	spans := Spans(t, dir)
	if len(spans) != 2 {
		t.Fatalf("Spans = %d spans, want 2", len(spans))
	}
	byName := map[string]Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	p, c := byName["parent"], byName["child"]
	if !p.IsRoot() || c.IsRoot() {
		t.Errorf("IsRoot: parent %v child %v, want true false", p.IsRoot(), c.IsRoot())
	}
	if c.ParentSpanID != p.SpanID || c.TraceID != p.TraceID || c.Service != "svc" {
		t.Errorf("child = %+v, want parent %s in trace %s of svc", c, p.SpanID, p.TraceID)
	}
	if got := len(Trace(spans, p.TraceID)); got != 2 {
		t.Errorf("Trace = %d spans, want 2", got)
	}
	if c.End.Before(c.Start) || time.Since(c.Start) > time.Minute {
		t.Errorf("child times %v..%v look wrong", c.Start, c.End)
	}
}
