// Command analytics projects request events into counts by tenant, day,
// service, channel and status, serves them, and exports them as files in
// object storage (report.export.v1). See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/services/analytics/internal/httpapi"
	"github.com/agora-platform/agora/services/analytics/internal/messaging"
	"github.com/agora-platform/agora/services/analytics/internal/postgres"
	"github.com/agora-platform/agora/services/analytics/migrations"
)

func main() { host.Main("analytics", run) }

type config struct {
	host host.Config
	// reportsBucket (REPORTS_BUCKET) holds the export files.
	reportsBucket string
	// reportsPublicEndpoint (REPORTS_PUBLIC_ENDPOINT) is the store as the
	// clients who download see it; empty: S3_ENDPOINT.
	reportsPublicEndpoint string
	// reportsURLTTL (REPORTS_URL_TTL) is how long a download link works.
	reportsURLTTL time.Duration
	// reportsPageRows (REPORTS_PAGE_ROWS) is how many rows an export reads
	// at a time; its progress is recorded after each page.
	reportsPageRows int
	// reportsWorkers (REPORTS_WORKERS) is how many exports one instance
	// runs at once; each holds two database connections.
	reportsWorkers int
	// foldInterval (ANALYTICS_FOLD_INTERVAL) is how often the counter
	// deltas handlers append are folded into the counters; readers see
	// them before, so it bounds only how long deltas wait in their table.
	foldInterval time.Duration
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("analytics", ":8087", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{host: hc, reportsBucket: "reports", reportsPublicEndpoint: getenv("REPORTS_PUBLIC_ENDPOINT"),
		reportsURLTTL: 15 * time.Minute, reportsPageRows: 1000, reportsWorkers: 2, foldInterval: time.Second}
	if v := getenv("REPORTS_BUCKET"); v != "" {
		c.reportsBucket = v
	}
	if v := getenv("REPORTS_URL_TTL"); v != "" {
		// S3 signs links for 1 s to 7 days.
		if c.reportsURLTTL, err = time.ParseDuration(v); err != nil || c.reportsURLTTL < time.Second || c.reportsURLTTL > 7*24*time.Hour {
			return c, fmt.Errorf("REPORTS_URL_TTL: %q is not a duration from 1s to 168h", v)
		}
	}
	if v := getenv("ANALYTICS_FOLD_INTERVAL"); v != "" {
		if c.foldInterval, err = time.ParseDuration(v); err != nil || c.foldInterval < 10*time.Millisecond || c.foldInterval > time.Hour {
			return c, fmt.Errorf("ANALYTICS_FOLD_INTERVAL: %q is not a duration from 10ms to 1h", v)
		}
	}
	for name, dst := range map[string]*int{"REPORTS_PAGE_ROWS": &c.reportsPageRows, "REPORTS_WORKERS": &c.reportsWorkers} {
		if v := getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil || *dst < 1 || *dst > 100000 {
				return c, fmt.Errorf("%s: %q is not a whole number from 1 to 100000", name, v)
			}
		}
	}
	return c, nil
}

// run starts the service and blocks until ctx ends; it returns nil after a
// graceful shutdown, or the error that stopped it.
func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	// The relay publishes the export jobs the API enqueues.
	h, err := host.New(ctx, cfg.host, host.Options{Migrations: migrations.FS(), NeedsAuth: true, Relay: true, OpenAPI: httpapi.OpenAPI}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	objects, err := objstore.New(objstore.Config{Endpoint: cfg.host.S3Endpoint, AccessKey: cfg.host.S3AccessKey,
		SecretKey: cfg.host.S3SecretKey, PublicEndpoint: cfg.reportsPublicEndpoint})
	if err != nil {
		return err
	}
	// The bucket is made at start when the store is up; when it is not, the
	// projection still runs and the first export makes it.
	objects.PrepareBucket(ctx, cfg.reportsBucket, h.Log)
	store := postgres.New(h.Pool, h.Outbox)
	if err := messaging.Attach(h, messaging.Deps{Store: store, Objects: objects, Bucket: cfg.reportsBucket, FoldInterval: cfg.foldInterval,
		ExportPageRows: cfg.reportsPageRows, ExportWorkers: cfg.reportsWorkers, Log: h.Log}); err != nil {
		return err
	}
	return h.Serve(ctx, httpapi.NewHandler(httpapi.Deps{Auth: h.Verifier, Reports: store, Exports: store,
		Links: objects, Bucket: cfg.reportsBucket, LinkTTL: cfg.reportsURLTTL, Log: h.Log}), nil)
}
