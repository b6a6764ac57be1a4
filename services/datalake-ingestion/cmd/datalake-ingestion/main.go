// Command datalake-ingestion writes request events to the data lake as
// Parquet files in MinIO, in batches, with a lineage record per event.
// See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/batch"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/httpapi"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/ingest"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/objectstore"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
	"github.com/agora-platform/agora/services/datalake-ingestion/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "datalake-ingestion:", err)
		os.Exit(1)
	}
}

// queues are the data lake's: request events (docs/architecture.md) and every
// other tenant domain's events.
var queues = []string{"datalake.request-events", "datalake.platform-events"}

type config struct {
	host         host.Config
	bucket       string
	batchSize    int
	batchAge     time.Duration
	flushTimeout time.Duration
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("datalake-ingestion", ":8086", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{host: hc, bucket: "datalake", batchSize: 500, batchAge: 2 * time.Second, flushTimeout: 30 * time.Second}
	if v := getenv("DATALAKE_BUCKET"); v != "" {
		c.bucket = v
	}
	if v := getenv("DATALAKE_BATCH_SIZE"); v != "" {
		if c.batchSize, err = strconv.Atoi(v); err != nil || c.batchSize < 1 || c.batchSize > 10000 {
			return c, fmt.Errorf("DATALAKE_BATCH_SIZE: %q is not between 1 and 10000", v)
		}
	}
	for name, dst := range map[string]*time.Duration{"DATALAKE_BATCH_AGE": &c.batchAge, "DATALAKE_FLUSH_TIMEOUT": &c.flushTimeout} {
		if v := getenv(name); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil || *dst <= 0 {
				return c, fmt.Errorf("%s: %q is not a positive duration", name, v)
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
	var specs []topology.Consumer
	for _, q := range queues {
		spec, ok := topology.Platform().Consumer(q)
		if !ok {
			return fmt.Errorf("platform topology has no %s queue", q)
		}
		specs = append(specs, spec)
	}
	h, err := host.New(ctx, cfg.host, host.Options{Consumers: specs, Migrations: migrations.FS(), NeedsAuth: true}, stdout)
	if err != nil {
		return err
	}
	objects, err := objectstore.New(objectstore.Config{Endpoint: cfg.host.S3Endpoint, AccessKey: cfg.host.S3AccessKey,
		SecretKey: cfg.host.S3SecretKey, Bucket: cfg.bucket})
	if err != nil {
		return err
	}
	store := postgres.New(h.Pool)
	writer := ingest.NewWriter(objects, store, h.Log)
	batcher := batch.New(cfg.batchSize, cfg.batchAge, writer.Flush)
	// The batcher outlives the consumers: Serve waits for in-flight
	// handlers, which wait for their batch.
	batchCtx, stopBatcher := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		batcher.Run(batchCtx, cfg.flushTimeout)
	}()
	defer func() {
		stopBatcher()
		wg.Wait()
	}()
	// Every message of a batch is an unacked delivery whose handler waits:
	// prefetch and concurrency must hold a whole batch.
	opts := fabric.ConsumerOptions{Prefetch: cfg.batchSize, Concurrency: cfg.batchSize}
	for _, q := range queues {
		if err := h.Consume(q, ingest.Handler(batcher), opts); err != nil {
			return err
		}
	}
	return h.Serve(ctx, httpapi.NewHandler(store, h.Verifier, h.Log), nil)
}
