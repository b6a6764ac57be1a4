// Command analytics projects request events into counts by tenant, day,
// service, channel and status, and serves them. See README.md.
package main

import (
	"context"
	"io"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/analytics/internal/httpapi"
	"github.com/agora-platform/agora/services/analytics/internal/messaging"
	"github.com/agora-platform/agora/services/analytics/internal/postgres"
	"github.com/agora-platform/agora/services/analytics/migrations"
)

func main() { host.Main("analytics", run) }

const queue = "analytics.request-events"

type config struct {
	host host.Config
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("analytics", ":8087", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{host: hc}
	return c, nil
}

// run starts the service and blocks until ctx ends; it returns nil after a
// graceful shutdown, or the error that stopped it.
func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	specs, err := topology.Platform().Lookup(queue)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, cfg.host, host.Options{Consumers: specs, Migrations: migrations.FS(), NeedsAuth: true}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	store := postgres.New(h.Pool)
	// One message per transaction: every message updates a few shared
	// counter cells, which a transaction holds until it commits. Batches
	// held them for the whole batch and doubled analytics' latency at
	// 40 req/s (README, "Throughput"); counters that scale need deltas
	// folded in by one writer.
	if err := h.ConsumeTx(queue, messaging.New(store).Handle, fabric.ConsumerOptions{MaxBatch: 1}); err != nil {
		return err
	}
	return h.Serve(ctx, httpapi.NewHandler(store, h.Verifier, h.Log), nil)
}
