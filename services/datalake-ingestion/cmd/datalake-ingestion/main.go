// Command datalake-ingestion writes request events to the data lake as
// Parquet files in MinIO, in batches, with a lineage record per event, and
// serves a tenant's stored events back (GET /v1/history). See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/history"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/httpapi"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/messaging"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/seal"
	"github.com/agora-platform/agora/services/datalake-ingestion/migrations"
)

func main() { host.Main("datalake-ingestion", run) }

type config struct {
	host         host.Config
	bucket       string
	batchSize    int
	batchAge     time.Duration
	flushTimeout time.Duration
	// orphanGrace and orphanSweep: files no committed lineage points at
	// are removed once older than orphanGrace, looked for every orphanSweep.
	orphanGrace time.Duration
	orphanSweep time.Duration
	// sealKey is the master key restricted fields are sealed under
	// (DATALAKE_SEAL_KEY); nil when unset.
	sealKey []byte
}

// sealKeyVar names the master key's variable.
const sealKeyVar = "DATALAKE_SEAL_KEY"

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("datalake-ingestion", ":8086", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{host: hc, bucket: "datalake", batchSize: 500, batchAge: 2 * time.Second, flushTimeout: 30 * time.Second,
		orphanGrace: 15 * time.Minute, orphanSweep: 10 * time.Minute}
	if v := getenv("DATALAKE_BUCKET"); v != "" {
		c.bucket = v
	}
	if v := getenv("DATALAKE_BATCH_SIZE"); v != "" {
		if c.batchSize, err = strconv.Atoi(v); err != nil || c.batchSize < 1 || c.batchSize > 10000 {
			return c, fmt.Errorf("DATALAKE_BATCH_SIZE: %q is not between 1 and 10000", v)
		}
	}
	for name, dst := range map[string]*time.Duration{"DATALAKE_BATCH_AGE": &c.batchAge, "DATALAKE_FLUSH_TIMEOUT": &c.flushTimeout,
		"DATALAKE_ORPHAN_GRACE": &c.orphanGrace, "DATALAKE_ORPHAN_SWEEP": &c.orphanSweep} {
		if v := getenv(name); v != "" {
			if *dst, err = time.ParseDuration(v); err != nil || *dst <= 0 {
				return c, fmt.Errorf("%s: %q is not a positive duration", name, v)
			}
		}
	}
	if v := getenv(sealKeyVar); v != "" {
		if c.sealKey, err = seal.ParseKey(v); err != nil {
			return c, fmt.Errorf("%s: want the standard base64 of %d random bytes (openssl rand -base64 %d): %w", sealKeyVar, seal.KeySize, seal.KeySize, err)
		}
	}
	// A file younger than a flush may still be waiting for its lineage
	// commit: sweeping it would lose the batch.
	if c.orphanGrace < 2*c.flushTimeout {
		return c, fmt.Errorf("DATALAKE_ORPHAN_GRACE (%s) must be at least twice DATALAKE_FLUSH_TIMEOUT (%s)", c.orphanGrace, c.flushTimeout)
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
	// Checked before anything connects: without its key the lake would
	// have to store restricted fields in clear or refuse every such event.
	restrictions, err := restrictionsOf(cfg.sealKey)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, cfg.host, host.Options{Migrations: migrations.FS(), NeedsAuth: true, OpenAPI: httpapi.OpenAPI}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	objects, err := objstore.New(objstore.Config{Endpoint: cfg.host.S3Endpoint, AccessKey: cfg.host.S3AccessKey,
		SecretKey: cfg.host.S3SecretKey})
	if err != nil {
		return err
	}
	store := postgres.New(h.Pool)
	if err := messaging.Attach(h, messaging.Deps{Lake: objects, Bucket: cfg.bucket, Store: store,
		BatchSize: cfg.batchSize, BatchAge: cfg.batchAge, FlushTimeout: cfg.flushTimeout,
		OrphanGrace: cfg.orphanGrace, OrphanSweep: cfg.orphanSweep, Restrictions: restrictions, Meter: h.Metrics.Meter, Log: h.Log}); err != nil {
		return err
	}
	return h.Serve(ctx, httpapi.NewHandler(httpapi.Deps{Auth: h.Verifier, Lineage: store,
		History: history.New(store, objects, restrictions), Log: h.Log}), nil)
}

// restrictionsOf returns the catalog's rules for restricted fields, sealed
// under key. A missing key is an error naming its variable when the
// catalog has a type to seal.
func restrictionsOf(key []byte) (*lake.Restrictions, error) {
	reg, err := registry.Default()
	if err != nil {
		return nil, err
	}
	var sealer lake.Sealer // nil unless a key is set: a nil *seal.Sealer would not be
	if key != nil {
		if sealer, err = seal.New(key); err != nil {
			return nil, err
		}
	}
	r, err := lake.NewRestrictions(reg.All(), sealer)
	if errors.Is(err, lake.ErrNoSealer) {
		return nil, fmt.Errorf("%s is not set: %w; set it to the standard base64 of %d random bytes (openssl rand -base64 %d)", sealKeyVar, err, seal.KeySize, seal.KeySize)
	}
	return r, err
}
