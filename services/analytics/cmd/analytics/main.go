// Command analytics projects request events into counts by tenant, day,
// service, channel and status, and serves them. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/analytics/internal/consumer"
	"github.com/agora-platform/agora/services/analytics/internal/httpapi"
	"github.com/agora-platform/agora/services/analytics/internal/postgres"
	"github.com/agora-platform/agora/services/analytics/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "analytics:", err)
		os.Exit(1)
	}
}

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
	spec, ok := topology.Platform().Consumer(queue)
	if !ok {
		return fmt.Errorf("platform topology has no %s queue", queue)
	}
	h, err := host.New(ctx, cfg.host, host.Options{Consumers: []topology.Consumer{spec}, Migrations: migrations.FS(), NeedsAuth: true}, stdout)
	if err != nil {
		return err
	}
	store := postgres.New(h.Pool)
	// One batch at a time: every batch updates shared counter cells, and
	// two concurrent batches touching them in different orders would
	// deadlock. Batching, not concurrency, is what carries the load here.
	if err := h.ConsumeTx(queue, consumer.New(store).Handle, fabric.ConsumerOptions{Concurrency: 1, MaxBatch: 64}); err != nil {
		return err
	}
	return h.Serve(ctx, httpapi.NewHandler(store, h.Verifier, h.Log), nil)
}
