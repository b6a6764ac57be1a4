// Command request runs the request service: citizens submit requests and
// attach documents; workflow events keep each request's status current.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agora-platform/agora/pkg/fabric/gateway"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/retention"
	"github.com/agora-platform/agora/services/request/internal/httpapi"
	"github.com/agora-platform/agora/services/request/internal/messaging"
	"github.com/agora-platform/agora/services/request/internal/postgres"
	"github.com/agora-platform/agora/services/request/internal/request"
	"github.com/agora-platform/agora/services/request/migrations"
)

func main() { host.Main("request", run) }

type config struct {
	host.Config
	DocumentsBucket string
	MaxUploadBytes  int64
	// IdempotencyRetention (RETENTION_IDEMPOTENCY, default 48 h; off keeps
	// them) is how long an Idempotency-Key is remembered: a retry after it
	// submits anew.
	IdempotencyRetention time.Duration
	// GatewaySources (GATEWAY_SOURCES_FILE) registers the external systems
	// whose events the gateway accepts; GatewayWindow (GATEWAY_WINDOW,
	// default 5m) is how old a signature may be.
	GatewaySources string
	GatewayWindow  time.Duration
	// SubmitRate (SUBMIT_RATE_PER_TENANT, submissions per second, default
	// defaultSubmitRate; 0: unlimited) and SubmitBurst
	// (SUBMIT_BURST_PER_TENANT, default 2 s worth) limit each tenant's
	// POST /v1/requests across all instances; SubmitRates
	// (SUBMIT_RATE_OVERRIDES, "org-a=500,org-b=20") sets other rates for
	// some tenants. Over it: 429 with Retry-After.
	SubmitRate  float64
	SubmitBurst int
	SubmitRates map[string]float64
}

// defaultSubmitRate is each tenant's submissions per second unless
// SUBMIT_RATE_PER_TENANT says otherwise. On by default, so that no
// deployment lets one tenant's flood fill the queues every tenant shares;
// the value is the highest rate at which BenchmarkTenantFairness kept a
// quiet tenant's p99 within 2× of its p99 alone (docs/deploy.md,
// "Fairness defaults"). A tenant that needs more gets an override.
const defaultSubmitRate = 20

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("request", ":8081", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{Config: hc, DocumentsBucket: "documents", MaxUploadBytes: 20 << 20, SubmitRate: defaultSubmitRate}
	if v := getenv("DOCUMENTS_BUCKET"); v != "" {
		c.DocumentsBucket = v
	}
	if v := getenv("MAX_UPLOAD_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return config{}, fmt.Errorf("MAX_UPLOAD_BYTES %q: want a positive number of bytes", v)
		}
		c.MaxUploadBytes = n
	}
	c.GatewaySources = getenv("GATEWAY_SOURCES_FILE")
	if v := getenv("GATEWAY_WINDOW"); v != "" {
		if c.GatewayWindow, err = time.ParseDuration(v); err != nil || c.GatewayWindow <= 0 {
			return config{}, fmt.Errorf("GATEWAY_WINDOW %q: want a positive duration like 5m", v)
		}
	}
	if v := getenv("SUBMIT_RATE_PER_TENANT"); v != "" {
		if c.SubmitRate, err = strconv.ParseFloat(v, 64); err != nil || c.SubmitRate < 0 {
			return config{}, fmt.Errorf("SUBMIT_RATE_PER_TENANT %q: want submissions per second, 0 for no limit", v)
		}
	}
	c.SubmitBurst = max(1, int(2*c.SubmitRate))
	if v := getenv("SUBMIT_BURST_PER_TENANT"); v != "" {
		if c.SubmitBurst, err = strconv.Atoi(v); err != nil || c.SubmitBurst < 1 {
			return config{}, fmt.Errorf("SUBMIT_BURST_PER_TENANT %q: want a positive integer", v)
		}
	}
	if v := getenv("SUBMIT_RATE_OVERRIDES"); v != "" {
		if c.SubmitRates, err = ratelimit.ParseRates(v); err != nil {
			return config{}, fmt.Errorf("SUBMIT_RATE_OVERRIDES (tenant=submissions per second): %w", err)
		}
		if c.SubmitRate == 0 {
			return config{}, errors.New("SUBMIT_RATE_OVERRIDES needs a per-tenant limit, the rate of every other tenant: SUBMIT_RATE_PER_TENANT is 0")
		}
	}
	if c.IdempotencyRetention, err = retention.Age(getenv, "RETENTION_IDEMPOTENCY", 48*time.Hour); err != nil {
		return config{}, err
	}
	return c, nil
}

func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return serve(ctx, cfg, stdout)
}

func serve(ctx context.Context, cfg config, stdout io.Writer) error {
	// Before host.New: a store that cannot be reached fails the start-up
	// before any connection is opened.
	blobs, err := objstore.New(objstore.Config{Endpoint: cfg.S3Endpoint, AccessKey: cfg.S3AccessKey, SecretKey: cfg.S3SecretKey})
	if err != nil {
		return err
	}
	if err := blobs.EnsureBucket(ctx, cfg.DocumentsBucket); err != nil {
		return fmt.Errorf("object store %s: %w", cfg.S3Endpoint, err)
	}
	h, err := host.New(ctx, cfg.Config, host.Options{
		Migrations: migrations.FS(), NeedsAuth: true, Relay: true,
		// Row-level security with FORCE (migration 00001): cleaned tenant
		// by tenant, the tenants kept by migration 00002's trigger.
		Retain:  []retention.Table{{Name: "idempotency_key", Column: "created_at", Age: cfg.IdempotencyRetention, TenantScoped: true}},
		OpenAPI: httpapi.OpenAPI,
	}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	store := postgres.New(h.Pool, h.Outbox, time.Now)
	if err := messaging.Attach(h, messaging.Deps{Store: store}); err != nil {
		return err
	}
	// External systems' events: none are accepted until sources are
	// registered (GATEWAY_SOURCES_FILE); each is then refused as unknown.
	var sources []gateway.Source
	if cfg.GatewaySources != "" {
		if sources, err = gateway.LoadSources(cfg.GatewaySources, h.Reg); err != nil {
			return err
		}
	}
	external := gateway.New(h.Pool, h.Outbox, h.Reg, sources, time.Now, cfg.GatewayWindow, h.Log)
	var submitLimit httpapi.Limiter
	if cfg.SubmitRate > 0 {
		if submitLimit, err = ratelimit.NewPerKey(h.Pool, cfg.Schema, "submit:", cfg.SubmitRate, cfg.SubmitBurst, cfg.SubmitRates); err != nil {
			return err
		}
	}
	routes := httpapi.NewHandler(httpapi.Deps{
		Auth: h.Verifier, Requests: store, Operations: store, Log: h.Log, ExternalEvents: external,
		SubmitLimit: submitLimit,
		OnThrottle: func(ctx context.Context, tenantID string) {
			h.Metrics.Throttled.Add(ctx, 1, metric.WithAttributes(attribute.String("limiter", "submit"), attribute.String("tenant", tenantID)))
		},
		Documents:      request.NewDocuments(store, blobs, cfg.DocumentsBucket, time.Now),
		MaxUploadBytes: cfg.MaxUploadBytes,
	})
	return h.Serve(ctx, routes, nil)
}
