// Package host runs a platform service: it reads the shared configuration,
// opens the database (own schema, migrated) and the supervised broker
// connection (own topology, redeclared on reconnect), wires tracing and
// metrics, serves /healthz, /readyz, /metrics and the service's OpenAPI
// document (/openapi.json) beside the service's routes, runs its consumers
// and outbox relay, and shuts all of it down in order: HTTP first, then
// consumers (in-flight messages finish), then the relay, then connections.
package host

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/console"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
	"github.com/agora-platform/agora/pkg/fabric/internal/execution"
	"github.com/agora-platform/agora/pkg/fabric/internal/ops"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/internal/replay"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/migrations"
	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/retention"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry/httpspan"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Config is the environment every service reads (docs/architecture.md, "Configuration").
type Config struct {
	Service      string // e.g. "request"
	Schema       string // its Postgres schema, e.g. "document_worker"
	AMQPURL      string
	AMQPCAFile   string // AMQP_CA_FILE: CA for amqps:// (optional)
	AMQPCertFile string // AMQP_CERT_FILE / AMQP_KEY_FILE: client certificate (optional)
	AMQPKeyFile  string
	DatabaseURL  string
	// MigrateURL (DATABASE_MIGRATE_URL) connects as the schema's owner role
	// to apply migrations at start-up; the service itself runs as
	// DatabaseURL's role, which owns nothing and so cannot switch row-level
	// security off. Empty: migrations run through DatabaseURL (a local
	// superuser, or a no-op check when an operator migrated beforehand).
	MigrateURL   string
	S3Endpoint   string
	S3AccessKey  string
	S3SecretKey  string
	HTTPAddr     string
	OTLPEndpoint string // traces off when empty (unless TracesFile is set)
	TracesFile   string // OTEL_TRACES_FILE: spans as JSON lines, for tests and local runs
	JWTIssuer    string
	JWTKeys      string // JWKS file or URL
	// DebugAddr (DEBUG_ADDR, e.g. 127.0.0.1:6061) serves net/http/pprof on a
	// listener of its own, never on the public port; off when empty. It also
	// turns on block and mutex profiling, which cost a little on every wait.
	DebugAddr string
	// Console (CONSOLE_SERVICES, "name=url,…") serves the operator console
	// (package console) under /console/, asking the services named and
	// this one; off when empty. It needs JWT_KEYS to verify operators.
	Console  []console.Target
	LogLevel slog.Level
	// RetryTiers (RETRY_TIERS, e.g. "100ms,200ms") replaces every consumer's
	// retry delays: for tests and demos on their own vhost only, since the
	// broker refuses a queue redeclared with another TTL.
	RetryTiers []topology.Duration
	// Retention (RETENTION_*) schedules the deletion of expired inbox,
	// outbox and DLQ audit rows and of the tables in Options.Retain.
	Retention retention.Config
	// HistoryURL (HISTORY_URL) is the data lake service whose history
	// replays read (package replay); replays are refused without it.
	HistoryURL string
	// PublishRates limit what the service enqueues (outbox.WithLimits),
	// per second, each bucket shared by every instance (rate_bucket):
	// PUBLISH_RATE_PER_TYPE ("request.submitted.v1=200,…") by event type,
	// PUBLISH_RATE_PER_PRODUCER ("gateway/catalog=10,…") by the envelope's
	// producer. Bursts are two seconds' worth. Types and producers not
	// named are not limited.
	PublishRatePerType, PublishRatePerProducer map[string]float64
	// OutageHold (OUTAGE_HOLD, a Go duration) is how long every consumer
	// keeps a message through an outage before giving it back to its
	// queue (fabric.ConsumerOptions.OutageHold; 0: the fabric's 10 min).
	// A consumer's own option wins.
	OutageHold time.Duration
	// RelayWorkers (OUTBOX_RELAY_WORKERS) is how many cycles the outbox
	// relay overlaps (relay.Options.Workers); 0: the relay's default,
	// one.
	RelayWorkers int
	// Release (RELEASE_ID, default "dev") is the release the service
	// runs: the id of the release bundle deployed (fabricctl release).
	// Every consumer and worker tells it to its handlers
	// (fabric.ExecutionOf), so what they record names the release that
	// made it.
	Release string
}

// releasePattern bounds a release id: it is recorded with decisions and
// written into spans and logs.
var releasePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$`)

// ConfigFrom reads the environment through getenv. defaultAddr is the
// service's port from the architecture (":8081").
func ConfigFrom(service, defaultAddr string, getenv func(string) string) (Config, error) {
	get := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	c := Config{
		Service:      service,
		Schema:       strings.ReplaceAll(service, "-", "_"),
		AMQPURL:      get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
		AMQPCAFile:   getenv("AMQP_CA_FILE"),
		AMQPCertFile: getenv("AMQP_CERT_FILE"),
		AMQPKeyFile:  getenv("AMQP_KEY_FILE"),
		DatabaseURL:  get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		MigrateURL:   getenv("DATABASE_MIGRATE_URL"),
		S3Endpoint:   get("S3_ENDPOINT", "127.0.0.1:9000"),
		S3AccessKey:  get("S3_ACCESS_KEY", "agora-dev"),        // local-development default
		S3SecretKey:  get("S3_SECRET_KEY", "agora-dev-secret"), // local-development default
		HTTPAddr:     get("HTTP_ADDR", defaultAddr),
		OTLPEndpoint: getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
		TracesFile:   getenv("OTEL_TRACES_FILE"),
		JWTIssuer:    get("JWT_ISSUER", auth.DevIssuer),
		JWTKeys:      getenv("JWT_KEYS"),
		DebugAddr:    getenv("DEBUG_ADDR"),
		HistoryURL:   getenv("HISTORY_URL"),
	}
	if s := getenv("DATABASE_SCHEMA"); s != "" {
		c.Schema = s
	}
	if v := getenv("CONSOLE_SERVICES"); v != "" {
		targets, err := console.ParseTargets(v)
		if err != nil {
			return c, err
		}
		c.Console = targets
	}
	if lvl := getenv("LOG_LEVEL"); lvl != "" {
		if err := c.LogLevel.UnmarshalText([]byte(lvl)); err != nil {
			return c, fmt.Errorf("LOG_LEVEL: %w", err)
		}
	}
	if v := getenv("RETRY_TIERS"); v != "" {
		for _, p := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(p))
			if err != nil || d <= 0 {
				return c, fmt.Errorf("RETRY_TIERS: %q is not a positive duration", p)
			}
			c.RetryTiers = append(c.RetryTiers, topology.Duration(d))
		}
	}
	if (c.AMQPCertFile == "") != (c.AMQPKeyFile == "") {
		return c, errors.New("AMQP_CERT_FILE and AMQP_KEY_FILE go together")
	}
	for _, r := range []struct {
		name string
		dst  *map[string]float64
	}{{"PUBLISH_RATE_PER_TYPE", &c.PublishRatePerType}, {"PUBLISH_RATE_PER_PRODUCER", &c.PublishRatePerProducer}} {
		if v := getenv(r.name); v != "" {
			rates, err := ratelimit.ParseRates(v)
			if err != nil {
				return c, fmt.Errorf("%s: %w", r.name, err)
			}
			*r.dst = rates
		}
	}
	if v := getenv("OUTAGE_HOLD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 25*time.Minute {
			return c, fmt.Errorf("OUTAGE_HOLD: %q is not a duration above 0 and at most 25m (the broker closes a channel that holds a message 30 min)", v)
		}
		c.OutageHold = d
	}
	if v := getenv("OUTBOX_RELAY_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("OUTBOX_RELAY_WORKERS: %q is not a positive number", v)
		}
		c.RelayWorkers = n
	}
	c.Release = get("RELEASE_ID", "dev")
	if !releasePattern.MatchString(c.Release) {
		return c, fmt.Errorf("RELEASE_ID: %q is not a release id (letters, digits, '.', '_', '-', '+', at most 100)", c.Release)
	}
	rc, err := retention.ConfigFrom(getenv)
	if err != nil {
		return c, err
	}
	c.Retention = rc
	return c, nil
}

// publishLimits are the outbox limits of PUBLISH_RATE_PER_TYPE and
// PUBLISH_RATE_PER_PRODUCER.
func (h *host) publishLimits() ([]outbox.Limit, error) {
	var limits []outbox.Limit
	for _, l := range []struct {
		name  string
		rates map[string]float64
		key   func(envelope.Envelope) string
	}{
		{"type", h.Cfg.PublishRatePerType, func(e envelope.Envelope) string { return e.Type }},
		{"producer", h.Cfg.PublishRatePerProducer, func(e envelope.Envelope) string { return e.Producer }},
	} {
		if len(l.rates) == 0 {
			continue
		}
		// Every named key has its own rate (an override); the default
		// rate is never used, since unnamed keys are not limited.
		buckets, err := ratelimit.NewPerKey(h.Pool, h.Cfg.Schema, "publish-"+l.name+":", 1, 2, l.rates)
		if err != nil {
			return nil, err
		}
		rates := l.rates
		limits = append(limits, outbox.Limit{Name: l.name, Limiter: buckets, Key: func(e envelope.Envelope) string {
			if k := l.key(e); rates[k] > 0 {
				return k
			}
			return ""
		}})
	}
	return limits, nil
}

// defaultPoolSize is each service's database pool size unless DATABASE_URL
// sets pool_max_conns: seven services stay well inside PostgreSQL's default
// max_connections (100).
const defaultPoolSize = 10

// Options describe what a service needs from the host.
type Options struct {
	// Consumers are queues of a topology other than the platform's (a
	// test's, another system's), declared as given beside the service's
	// own: those the catalog (services: in pkg/fabric/catalog/catalog.yaml)
	// declares for Config.Service, with their priority lanes, which the
	// host looks up in topology.Platform and declares with the platform
	// exchanges on every connect.
	Consumers []topology.Consumer
	// Migrations are the service's goose migrations (applied after the
	// fabric's, tracked in <schema>.service_migrations).
	Migrations fs.FS
	// NeedsAuth loads the JWT verifier (JWT_KEYS is then required). A
	// service with consumers loads it whenever JWT_KEYS is set, for the
	// DLQ API the host serves for its queues (see dlqHandler).
	NeedsAuth bool
	// Relay runs the outbox relay for the service's schema.
	Relay bool
	// Retain registers the service's own tables for retention, beside the
	// fabric's inbox, outbox and DLQ audit tables (the request service's
	// idempotency keys: their age comes from its own variable).
	Retain []retention.Table
	// OpenAPI is the service's OpenAPI 3.1 document (YAML or JSON): its own
	// routes, written by hand, referring to the shared components of
	// package openapi. New merges it with the host's routes (package
	// openapi) and Serve serves the result as JSON at GET /openapi.json,
	// without a token. Empty: a document of the host's routes alone.
	OpenAPI []byte
}

// host holds a service's connections and runs its workers.
type host struct {
	Cfg      Config
	Log      *slog.Logger
	Pool     *pgxpool.Pool
	Conn     *broker.Conn
	Reg      *registry.Registry
	Pub      *broker.Publisher
	Outbox   *outbox.Outbox
	Metrics  *telemetry.Metrics
	Tracer   trace.TracerProvider
	Verifier *auth.Verifier

	opts       Options
	apiDoc     []byte // the merged OpenAPI document, JSON
	meter      *sdkmetric.MeterProvider
	metricsH   http.Handler
	shutdownTP func(context.Context) error
	consumers  []*broker.Consumer
	workers    []worker
	// simulatable are the transactional handlers a replay may simulate
	// (ConsumeTx with ConsumerOptions.Simulatable).
	simulatable map[string]fabric.TxHandler
	relay       *relay.Relay
	closeOnce   sync.Once
}

type worker struct {
	name string
	run  func(ctx context.Context) error
}

// New connects everything. It returns an error naming the dependency that
// failed; ctx bounds the start-up (the broker is retried until then).
func New(ctx context.Context, cfg Config, opts Options, logOut io.Writer) (*host, error) {
	opts.Consumers = append(slices.Clone(opts.Consumers), topology.Platform().ConsumersOf(cfg.Service)...)
	if len(cfg.RetryTiers) > 0 {
		consumers := make([]topology.Consumer, len(opts.Consumers))
		for i, c := range opts.Consumers {
			c.RetryTiers = cfg.RetryTiers
			consumers[i] = c
		}
		opts.Consumers = consumers
	}
	h := &host{Cfg: cfg, opts: opts,
		Log: slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: cfg.LogLevel})).With("service", cfg.Service)}
	var err error
	fail := func(format string, a ...any) (*host, error) {
		h.Close()
		return nil, fmt.Errorf(format, a...)
	}
	if h.Reg, err = registry.Default(); err != nil {
		return fail("%w", err)
	}
	if h.apiDoc, err = apiDocument(cfg.Service, opts); err != nil {
		return fail("%w", err)
	}
	if err := h.initTelemetry(ctx); err != nil {
		return fail("telemetry: %w", err)
	}
	if err := h.initDatabase(ctx); err != nil {
		return fail("database: %w", err)
	}
	if err := h.initBroker(ctx); err != nil {
		return fail("broker: %w", err)
	}
	h.Outbox = outbox.New(h.Reg)
	limits, err := h.publishLimits()
	if err != nil {
		return fail("publish limits: %w", err)
	}
	if len(limits) > 0 {
		h.Outbox = h.Outbox.WithLimits(h.Metrics, limits...)
	}
	if opts.Relay {
		// Published rows are deleted by the retention worker (RETENTION_OUTBOX),
		// not by the relay's own loop, so one setting governs them.
		h.relay = relay.New(h.Pool, cfg.Schema, h.Pub, relay.Options{Tracer: h.Tracer, Logger: h.Log, Retention: -1,
			Workers: cfg.RelayWorkers})
		// The relay in this process is woken directly, not by NOTIFY,
		// whose lock serializes every notifying commit of the cluster.
		h.Outbox = h.Outbox.WithWake(h.relay.Expect)
	}
	if opts.NeedsAuth || len(cfg.Console) > 0 || (len(opts.Consumers) > 0 && cfg.JWTKeys != "") {
		if cfg.JWTKeys == "" {
			return fail("JWT_KEYS is required (a JWKS file or URL; `make token` creates a local one)")
		}
		keys, err := auth.LoadKeys(ctx, cfg.JWTKeys)
		if err != nil {
			return fail("%w", err)
		}
		h.Verifier = auth.NewVerifier(keys, cfg.JWTIssuer)
	}
	if err := h.initRetention(); err != nil {
		return fail("retention: %w", err)
	}
	return h, nil
}

// initRetention registers the retention worker (package retention) unless
// RETENTION_INTERVAL is off: it runs beside the consumers from Serve,
// stops with them and is joined before the relay and connections close.
func (h *host) initRetention() error {
	rc := h.Cfg.Retention
	if rc.Interval <= 0 {
		h.Log.Info("retention off: expired inbox, outbox and DLQ audit rows and dead letters are kept")
		return nil
	}
	r, err := retention.New(h.Pool, h.Cfg.Schema, append(fabricTables(rc), h.opts.Retain...),
		retention.Options{Interval: rc.Interval, Batch: rc.Batch, Meter: h.Metrics.Meter, Logger: h.Log})
	if err != nil {
		return err
	}
	h.Go("retention", r.Run)
	if rc.DLQ > 0 && len(h.opts.Consumers) > 0 {
		h.Go("dlq archive", func(ctx context.Context) error { return h.archiveDeadLetters(ctx, rc.Interval, rc.DLQ) })
	}
	return nil
}

func (h *host) initTelemetry(ctx context.Context) error {
	mp, handler, err := telemetry.Prometheus()
	if err != nil {
		return err
	}
	h.meter, h.metricsH = mp, handler
	if h.Metrics, err = telemetry.NewMetrics(mp); err != nil {
		return err
	}
	res := resource.NewSchemaless(semconv.ServiceName(h.Cfg.Service))
	var exporter sdktrace.SpanExporter
	switch {
	case h.Cfg.TracesFile != "":
		f, err := os.OpenFile(h.Cfg.TracesFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("OTEL_TRACES_FILE: %w", err)
		}
		exporter, err = stdouttrace.New(stdouttrace.WithWriter(f))
		if err != nil {
			return err
		}
	case h.Cfg.OTLPEndpoint != "":
		exporter, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(h.Cfg.OTLPEndpoint))
		if err != nil {
			return fmt.Errorf("OTLP exporter: %w", err)
		}
	}
	if exporter == nil {
		h.Tracer = noop.NewTracerProvider()
		h.shutdownTP = func(context.Context) error { return nil }
		return nil
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(200*time.Millisecond)), sdktrace.WithResource(res))
	h.Tracer, h.shutdownTP = tp, tp.Shutdown
	return nil
}

func (h *host) initDatabase(ctx context.Context) error {
	pc, err := pgxpool.ParseConfig(h.Cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = h.Cfg.Schema
	pc.ConnConfig.RuntimeParams["application_name"] = h.Cfg.Service
	if !strings.Contains(h.Cfg.DatabaseURL, "pool_max_conns") {
		// pgxpool's default is max(4, CPUs). The relay's LISTEN holds one
		// connection for good, the relay one per batch (two while a
		// backlog drains: the batch being confirmed and the next), each
		// consumer goroutine one for a batch, and HTTP handlers need theirs: with 4, HTTP
		// submissions queued behind consumer batches (accepted rate fell
		// to 54 of 100 req/s offered). DATABASE_URL's pool_max_conns wins.
		pc.MaxConns = defaultPoolSize
	}
	if h.Pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return err
	}
	if err := h.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", pc.ConnConfig.Host, err)
	}
	return h.migrate(ctx)
}

// migrate brings the schema to the latest fabric and service migrations,
// through MigrateURL (the schema owner) when it is set, else through the
// service's own pool.
func (h *host) migrate(ctx context.Context) error {
	pool := h.Pool
	if h.Cfg.MigrateURL != "" {
		pc, err := pgxpool.ParseConfig(h.Cfg.MigrateURL)
		if err != nil {
			return fmt.Errorf("DATABASE_MIGRATE_URL: %w", err)
		}
		pc.ConnConfig.RuntimeParams["search_path"] = h.Cfg.Schema
		pc.ConnConfig.RuntimeParams["application_name"] = h.Cfg.Service + "-migrate"
		pc.MaxConns = 2
		if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return fmt.Errorf("DATABASE_MIGRATE_URL: %w", err)
		}
		defer pool.Close()
	}
	err := migrate(ctx, pool, h.Cfg.Schema, h.opts.Migrations)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" && h.Cfg.MigrateURL == "" {
		return fmt.Errorf("%w (the service's own role may not change its schema, as it should not: set DATABASE_MIGRATE_URL to the schema owner's URL, <schema>_owner in deploy/postgres)", err)
	}
	return err
}

// migrate creates schema when it is missing (local runs; provisioned
// deployments have one owned by the owner role) and applies the fabric's
// and then the service's migrations (service may be nil) through pool.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, service fs.FS) error {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if !exists {
		if err := migrations.CreateSchema(ctx, pool, schema); err != nil {
			return fmt.Errorf("schema %s is missing and cannot be created: %w", schema, err)
		}
	}
	if err := migrations.Apply(ctx, pool, schema); err != nil {
		return err
	}
	if service != nil {
		if err := migrations.ApplyFS(ctx, pool, schema, "service_migrations", service); err != nil {
			return err
		}
	}
	return nil
}

func (h *host) initBroker(ctx context.Context) error {
	var tlsCfg *tls.Config
	if h.Cfg.AMQPCAFile != "" || h.Cfg.AMQPCertFile != "" {
		var err error
		if tlsCfg, err = broker.TLSConfig(h.Cfg.AMQPCAFile, h.Cfg.AMQPCertFile, h.Cfg.AMQPKeyFile); err != nil {
			return err
		}
	}
	desc := topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: h.opts.Consumers}
	declare := func(ctx context.Context, c *amqp.Connection) error {
		if err := topology.Apply(ctx, c, desc); err != nil {
			var conflict *topology.ConflictError
			if errors.As(err, &conflict) {
				return &broker.FatalError{Err: err}
			}
			return err
		}
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var err error
	if h.Conn, err = broker.Dial(dctx, h.Cfg.AMQPURL, broker.Options{Name: h.Cfg.Service, TLS: tlsCfg, Logger: h.Log}, declare); err != nil {
		return err
	}
	h.Pub, err = broker.NewPublisher(h.Conn, h.Reg, broker.PublisherOptions{Tracer: h.Tracer, Metrics: h.Metrics, Logger: h.Log})
	return err
}

// consumer returns the service's topology entry for queue.
func (h *host) consumer(queue string) (topology.Consumer, error) {
	for _, c := range h.opts.Consumers {
		if c.Queue == queue {
			return c, nil
		}
	}
	return topology.Consumer{}, fmt.Errorf("host: %s is not one of the %s service's queues (declare it under services: in pkg/fabric/catalog/catalog.yaml)", queue, h.Cfg.Service)
}

// Attempts returns the most deliveries a message of queue gets before it is
// dead-lettered: the first, and one per retry tier.
func (h *host) Attempts(queue string) (int, error) {
	spec, err := h.consumer(queue)
	if err != nil {
		return 0, err
	}
	return len(spec.Tiers()) + 1, nil
}

// Consume registers a consumer of queue; it runs from Serve. Handlers that
// change the database use ConsumeTx instead.
func (h *host) Consume(queue string, handler fabric.Handler, opts fabric.ConsumerOptions) error {
	return h.addConsumer(queue, opts, func(spec topology.Consumer, opts fabric.ConsumerOptions) (*broker.Consumer, error) {
		return broker.NewConsumer(h.Conn, h.Pub, h.Reg, spec, handler, opts)
	})
}

// ConsumeTx registers a consumer of queue whose handler changes the
// database: each batch of deliveries runs in one inbox transaction (a
// savepoint per message, see inbox.BatchHandler), so under load one commit
// serves many messages. It runs from Serve.
func (h *host) ConsumeTx(queue string, handler fabric.TxHandler, opts fabric.ConsumerOptions) error {
	if opts.Simulatable {
		if h.simulatable == nil {
			h.simulatable = map[string]fabric.TxHandler{}
		}
		h.simulatable[queue] = handler
	}
	return h.addConsumer(queue, opts, func(spec topology.Consumer, opts fabric.ConsumerOptions) (*broker.Consumer, error) {
		return broker.NewConsumer(h.Conn, h.Pub, h.Reg, spec, h.inbox(queue).BatchHandler(handler), opts)
	})
}

func (h *host) addConsumer(queue string, opts fabric.ConsumerOptions, build func(topology.Consumer, fabric.ConsumerOptions) (*broker.Consumer, error)) error {
	spec, err := h.consumer(queue)
	if err != nil {
		return err
	}
	opts.Tracer, opts.Metrics, opts.Logger = h.Tracer, h.Metrics, h.Log
	if opts.OutageHold == 0 {
		opts.OutageHold = h.Cfg.OutageHold
	}
	if opts.Release == "" {
		opts.Release = h.Cfg.Release
	}
	c, err := build(spec, opts)
	if err != nil {
		return err
	}
	h.consumers = append(h.consumers, c)
	return nil
}

// Go registers a background worker (a timer sweep, a batcher) that Serve
// runs beside the consumers: its ctx ends when the consumers stop, after
// HTTP has shut down and before the relay does, so what it enqueues still
// gets published. A worker returning an error stops the service.
func (h *host) Go(name string, run func(ctx context.Context) error) {
	h.workers = append(h.workers, worker{name: name, run: run})
}

// inbox returns the inbox of queue in the service's schema.
func (h *host) inbox(queue string) *inbox.Inbox {
	return inbox.New(h.Pool, h.Cfg.Schema, queue, inbox.Options{Metrics: h.Metrics, Logger: h.Log})
}

// Serve listens on HTTPAddr with routes plus /healthz, /readyz, /metrics,
// /openapi.json and the DLQ API, runs the consumers and relay, and blocks
// until ctx ends; then it shuts down in order and returns nil, or the first
// fatal error. ready, if set, is called with the bound address once
// listening (tests use ":0").
func (h *host) Serve(ctx context.Context, routes http.Handler, ready func(addr string)) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "service": h.Cfg.Service})
	})
	mux.HandleFunc("GET /readyz", h.handleReady)
	mux.Handle("GET /metrics", h.metricsH)
	mux.HandleFunc("GET "+openapi.Path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(h.apiDoc)
	})
	if api := h.dlqHandler(); api != nil {
		mux.Handle(dlq.PathPrefix, httpspan.Server(h.Tracer)(edge.ValidText(api)))
	}
	if api := h.opsHandler(); api != nil {
		mux.Handle(ops.PathPrefix, httpspan.Server(h.Tracer)(edge.ValidText(api)))
	}
	if api := h.replayHandler(); api != nil {
		api = httpspan.Server(h.Tracer)(edge.ValidText(api))
		mux.Handle(replay.PathPrefix, api)
		mux.Handle(replay.PathPrefix+"/", api)
	}
	if routes == nil {
		// What no route serves is a problem, never the mux's plain text.
		routes = http.HandlerFunc(problem.NoRoute)
	}
	// Every service's input is checked once here, inside the span so
	// refusals are traced too (package edge).
	mux.Handle("/", httpspan.Server(h.Tracer)(edge.ValidText(routes)))
	ln, err := net.Listen("tcp", h.Cfg.HTTPAddr)
	if err != nil {
		h.Close()
		return fmt.Errorf("listen %s: %w", h.Cfg.HTTPAddr, err)
	}
	if len(h.Cfg.Console) > 0 {
		ui, err := h.console(ln.Addr())
		if err != nil {
			ln.Close()
			h.Close()
			return err
		}
		mux.Handle(console.Path, httpspan.Server(h.Tracer)(edge.ValidText(ui)))
	}
	// Every answer passes the security watch: it counts each 401 and 403
	// and what the handlers report (refused capabilities, other tenants
	// named, operators' mass actions), whoever wrote it.
	srv := &http.Server{Handler: security.Watch(mux, h.Metrics), ReadHeaderTimeout: 10 * time.Second}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	errs := make(chan error, len(h.consumers)+len(h.workers)+2)
	var consumersWG, relayWG sync.WaitGroup
	// A worker handles no message: its execution is the service's own
	// (SYSTEM), under the service's release (fabric.ExecutionOf).
	workerCtx := execution.With(workCtx, execution.Run{Service: h.Cfg.Service, Release: h.Cfg.Release})
	for _, wk := range h.workers {
		consumersWG.Add(1)
		go func() {
			defer consumersWG.Done()
			if err := wk.run(workerCtx); err != nil && workCtx.Err() == nil {
				errs <- fmt.Errorf("worker %s: %w", wk.name, err)
			}
		}()
	}
	for _, c := range h.consumers {
		consumersWG.Add(1)
		go func() {
			defer consumersWG.Done()
			if err := c.Run(workCtx); err != nil {
				errs <- err
			}
		}()
	}
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	if h.relay != nil {
		relayWG.Add(1)
		go func() {
			defer relayWG.Done()
			if err := h.relay.Run(relayCtx); err != nil {
				errs <- err
			}
		}()
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- err
		}
	}()
	if h.Cfg.DebugAddr != "" {
		dbg, err := h.serveDebug()
		if err != nil {
			errs <- err
		} else {
			defer dbg.Close()
		}
	}
	h.Log.Info("service started", "addr", ln.Addr().String(), "consumers", len(h.consumers), "relay", h.relay != nil)
	if ready != nil {
		ready(ln.Addr().String())
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		h.Log.Error("service failing", "err", runErr)
	}
	h.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx) // in-flight requests finish; their outbox rows are committed
	stopWork()
	consumersWG.Wait() // in-flight messages finish and are acked, or go back to the queue
	stopRelay()
	relayWG.Wait()
	h.Close()
	h.Log.Info("stopped")
	return runErr
}

// serveDebug serves the runtime profiles on DebugAddr, for measuring a
// service under load: go tool pprof http://<DEBUG_ADDR>/debug/pprof/profile.
func (h *host) serveDebug() (*http.Server, error) {
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	runtime.SetMutexProfileFraction(100)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", h.Cfg.DebugAddr)
	if err != nil {
		return nil, fmt.Errorf("debug listener %s: %w", h.Cfg.DebugAddr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	h.Log.Info("profiles served", "addr", ln.Addr().String())
	return srv, nil
}

func (h *host) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "broker": "ok"}
	status := http.StatusOK
	if err := h.Pool.Ping(ctx); err != nil {
		checks["database"], status = err.Error(), http.StatusServiceUnavailable
	}
	if _, err := h.Conn.Connection(ctx); err != nil {
		checks["broker"], status = err.Error(), http.StatusServiceUnavailable
	}
	writeJSON(w, status, checks)
}

// Close releases the publisher, broker connection, database pool and
// telemetry. Serve calls it on the way out; call it yourself when the
// service fails between New and Serve. It is safe to call twice.
func (h *host) Close() {
	h.closeOnce.Do(h.close)
}

func (h *host) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.Pub != nil {
		h.Pub.Close()
	}
	if h.Conn != nil {
		h.Conn.Close()
	}
	if h.Pool != nil {
		h.Pool.Close()
	}
	if h.shutdownTP != nil {
		_ = h.shutdownTP(ctx)
	}
	if h.meter != nil {
		_ = h.meter.Shutdown(ctx)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fabricTables are the fabric's own tables in every service schema, with
// the ages of c. Outbox rows are measured on published_at, which is NULL
// until the broker confirmed the row: a comparison with NULL is never
// true, so an unpublished row is never deleted, however old.
// inbox_security_event is not here on purpose: it is evidence of a forged
// or corrupted event and stays until someone decides otherwise.
func fabricTables(c retention.Config) []retention.Table {
	return []retention.Table{
		{Name: "inbox_message", Column: "received_at", Age: c.Inbox},
		{Name: "outbox_event", Column: "published_at", Age: c.Outbox},
		{Name: "dlq_audit", Column: "at", Age: c.DLQAudit},
		// Replay jobs are audit records too (their items go with them).
		{Name: "replay_job", Column: "updated_at", Age: c.DLQAudit},
	}
}
