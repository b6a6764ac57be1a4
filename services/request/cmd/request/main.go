// Command request runs the request service: citizens submit requests and
// attach documents; workflow events keep each request's status current.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/request/internal/blob"
	"github.com/agora-platform/agora/services/request/internal/consumer"
	"github.com/agora-platform/agora/services/request/internal/httpapi"
	"github.com/agora-platform/agora/services/request/internal/postgres"
	"github.com/agora-platform/agora/services/request/internal/request"
	"github.com/agora-platform/agora/services/request/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "request:", err)
		os.Exit(1)
	}
}

const workflowEventsQueue = "request.workflow-events"

type config struct {
	host.Config
	DocumentsBucket string
	MaxUploadBytes  int64
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("request", ":8081", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{Config: hc, DocumentsBucket: "documents", MaxUploadBytes: 20 << 20}
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
	spec, ok := topology.Platform().Consumer(workflowEventsQueue)
	if !ok {
		return fmt.Errorf("topology has no queue %s", workflowEventsQueue)
	}
	// Before host.New: the host has no Close of its own, only Serve's shutdown.
	blobs, err := blob.Open(ctx, blob.Config{Endpoint: cfg.S3Endpoint, AccessKey: cfg.S3AccessKey,
		SecretKey: cfg.S3SecretKey, Bucket: cfg.DocumentsBucket})
	if err != nil {
		return err
	}
	h, err := host.New(ctx, cfg.Config, host.Options{
		Consumers: []topology.Consumer{spec}, Migrations: migrations.FS(), NeedsAuth: true, Relay: true,
	}, stdout)
	if err != nil {
		return err
	}
	store := postgres.NewStore(h.Pool, h.Outbox, time.Now)
	if err := h.ConsumeTx(workflowEventsQueue, consumer.WorkflowEvents(store),
		fabric.ConsumerOptions{}); err != nil {
		return err
	}
	routes := httpapi.NewHandler(httpapi.Deps{
		Auth: h.Verifier, Requests: store, Log: h.Log,
		Documents:      request.NewDocuments(store, blobs, cfg.DocumentsBucket, time.Now),
		MaxUploadBytes: cfg.MaxUploadBytes,
	})
	return h.Serve(ctx, routes, nil)
}
