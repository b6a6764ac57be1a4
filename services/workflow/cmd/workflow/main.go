// Command workflow runs the workflow service: a process instance per
// submitted request (or per workflow.start.v1 command), from definitions
// kept as data, with SLA timers, task completion, and the registration of
// approved requests in SEI.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	// Schedules name IANA time zones: the image may have no zoneinfo.
	_ "time/tzdata"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/services/workflow/internal/agent"
	"github.com/agora-platform/agora/services/workflow/internal/httpapi"
	"github.com/agora-platform/agora/services/workflow/internal/knowledge"
	"github.com/agora-platform/agora/services/workflow/internal/messaging"
	"github.com/agora-platform/agora/services/workflow/internal/openai"
	"github.com/agora-platform/agora/services/workflow/internal/postgres"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/sei"
	"github.com/agora-platform/agora/services/workflow/internal/servicetoken"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
	"github.com/agora-platform/agora/services/workflow/migrations"
)

func main() { host.Main("workflow", run) }

type config struct {
	host.Config
	Catalog     *process.Catalog
	SLAInterval time.Duration
	SLABatch    int
	// StuckAfter (WATCHDOG_STUCK_AFTER) is the watchdog's threshold for
	// definitions without a stuckAfter; WatchdogInterval
	// (WATCHDOG_CHECK_INTERVAL) how often it sweeps.
	StuckAfter       time.Duration
	WatchdogInterval time.Duration
	// ScheduleInterval (SCHEDULE_CHECK_INTERVAL) is how often due schedule
	// slots are fired: a slot fires at most this late.
	ScheduleInterval time.Duration
	// JobInterval (REACTION_JOB_INTERVAL) and JobBatch (REACTION_JOB_BATCH)
	// pace mass reactions: a batch of requests per transaction.
	JobInterval time.Duration
	JobBatch    int
	// ReviewDue (REVIEW_DUE_AFTER) is how long approvals and reviews stay
	// open before they are overdue, unless their subscription says;
	// ReviewInterval (REVIEW_CHECK_INTERVAL) how often the overdue sweep
	// runs.
	ReviewDue, ReviewInterval time.Duration
	// DueSoon is the worklist's due-soon window (GET /v1/tasks?sla=due_soon).
	DueSoon time.Duration
	// SEI is the SEI gateway (SEI_URL, SEI_TIMEOUT); nil when SEI_URL is
	// unset: registration is then off (see run).
	SEI *sei.Client
	// Agent runs the subscriptions' agent steps; its Model is nil when
	// AGENT_MODEL_URL is unset (every step is then a human review).
	Agent *agent.Decider
}

// loadAgent reads the agent step's configuration: the model
// (AGENT_MODEL_URL, AGENT_MODEL, AGENT_MODEL_KEY), the AI builder that
// holds the tenants' knowledge (AGENT_KNOWLEDGE_URL) and the key the
// workflow signs its service tokens with (AGENT_TOKEN_KEY). Without
// AGENT_MODEL_URL there is no model, and nothing else is needed. The
// release a step records is the host's (RELEASE_ID), which every handler
// and worker reads from its execution (fabric.ExecutionOf).
func loadAgent(getenv func(string) string, issuer string) (*agent.Decider, error) {
	d := &agent.Decider{}
	base := getenv("AGENT_MODEL_URL")
	if base == "" {
		return d, nil
	}
	// The step's own timeout (at most MaxAgentTimeout) bounds each call;
	// the client's is a backstop.
	hc := &http.Client{Timeout: subscription.MaxAgentTimeout}
	model, err := openai.New(base, getenv("AGENT_MODEL_KEY"), hc)
	if err != nil {
		return nil, fmt.Errorf("AGENT_MODEL_URL: %w", err)
	}
	if d.ModelName = getenv("AGENT_MODEL"); d.ModelName == "" {
		return nil, fmt.Errorf("AGENT_MODEL_URL needs AGENT_MODEL (the model to ask)")
	}
	if getenv("AGENT_TOKEN_KEY") == "" || getenv("AGENT_KNOWLEDGE_URL") == "" {
		return nil, fmt.Errorf("AGENT_MODEL_URL needs AGENT_KNOWLEDGE_URL (the AI builder) and AGENT_TOKEN_KEY (the key of the workflow's service tokens)")
	}
	tokens, err := servicetoken.Load(getenv("AGENT_TOKEN_KEY"), issuer, "attendant")
	if err != nil {
		return nil, fmt.Errorf("AGENT_TOKEN_KEY: %w", err)
	}
	k, err := knowledge.New(getenv("AGENT_KNOWLEDGE_URL"), tokens, hc)
	if err != nil {
		return nil, fmt.Errorf("AGENT_KNOWLEDGE_URL: %w", err)
	}
	d.Model, d.Knowledge = model, k
	return d, nil
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("workflow", ":8082", getenv)
	if err != nil {
		return config{}, err
	}
	c := config{Config: hc, SLAInterval: time.Second, SLABatch: 100, DueSoon: process.DefaultDueSoon,
		StuckAfter: process.DefaultStuckAfter, WatchdogInterval: 30 * time.Second, ScheduleInterval: time.Second,
		JobInterval: time.Second, JobBatch: 500, ReviewDue: postgres.DefaultReviewDue, ReviewInterval: 10 * time.Second}
	defs := process.DefaultDefinitions
	if path := getenv("WORKFLOW_DEFINITIONS"); path != "" {
		if defs, err = os.ReadFile(path); err != nil {
			return config{}, fmt.Errorf("WORKFLOW_DEFINITIONS: %w", err)
		}
	}
	if c.Catalog, err = process.ParseCatalog(defs); err != nil {
		return config{}, err
	}
	if v := getenv("SLA_CHECK_INTERVAL"); v != "" {
		if c.SLAInterval, err = time.ParseDuration(v); err != nil || c.SLAInterval <= 0 {
			return config{}, fmt.Errorf("SLA_CHECK_INTERVAL %q: want a positive duration like 1s", v)
		}
	}
	if v := getenv("SLA_BATCH"); v != "" {
		if c.SLABatch, err = strconv.Atoi(v); err != nil || c.SLABatch <= 0 {
			return config{}, fmt.Errorf("SLA_BATCH %q: want a positive integer", v)
		}
	}
	for _, d := range []struct {
		name string
		into *time.Duration
	}{{"WATCHDOG_STUCK_AFTER", &c.StuckAfter}, {"WATCHDOG_CHECK_INTERVAL", &c.WatchdogInterval}, {"SCHEDULE_CHECK_INTERVAL", &c.ScheduleInterval}, {"REACTION_JOB_INTERVAL", &c.JobInterval},
		{"REVIEW_DUE_AFTER", &c.ReviewDue}, {"REVIEW_CHECK_INTERVAL", &c.ReviewInterval}} {
		if v := getenv(d.name); v != "" {
			if *d.into, err = time.ParseDuration(v); err != nil || *d.into <= 0 {
				return config{}, fmt.Errorf("%s %q: want a positive duration like 72h", d.name, v)
			}
		}
	}
	if v := getenv("REACTION_JOB_BATCH"); v != "" {
		if c.JobBatch, err = strconv.Atoi(v); err != nil || c.JobBatch <= 0 || c.JobBatch > 10_000 {
			return config{}, fmt.Errorf("REACTION_JOB_BATCH %q: want 1 to 10000", v)
		}
	}
	if v := getenv("SLA_DUE_SOON"); v != "" {
		if c.DueSoon, err = time.ParseDuration(v); err != nil || c.DueSoon <= 0 {
			return config{}, fmt.Errorf("SLA_DUE_SOON %q: want a positive duration like 4h", v)
		}
	}
	timeout := sei.DefaultTimeout
	if v := getenv("SEI_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil || timeout <= 0 {
			return config{}, fmt.Errorf("SEI_TIMEOUT %q: want a positive duration like 5s", v)
		}
	}
	if v := getenv("SEI_URL"); v != "" {
		if c.SEI, err = sei.New(v, timeout); err != nil {
			return config{}, fmt.Errorf("SEI_URL: %w", err)
		}
	}
	if c.Agent, err = loadAgent(getenv, hc.JWTIssuer); err != nil {
		return config{}, err
	}
	return c, nil
}

func run(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	h, err := host.New(ctx, cfg.Config, host.Options{
		Migrations: migrations.FS(), NeedsAuth: true, Relay: true,
		OpenAPI: httpapi.OpenAPI,
	}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	store := postgres.New(h.Pool, h.Outbox, cfg.Catalog, time.Now, cfg.DueSoon, cfg.StuckAfter)
	reactable, err := messaging.Reactable(h.Reg)
	if err != nil {
		return err
	}
	subs, err := store.Subscriptions(h.Reg, reactable, h.Metrics.Meter)
	if err != nil {
		return err
	}
	cfg.Agent.Catalog = h.Reg // which payload fields are masked or never sent
	cfg.Agent.Tracer = h.Tracer.Tracer("github.com/agora-platform/agora/services/workflow/agent")
	subs.UseAgent(cfg.Agent)
	subs.UseTracer(h.Tracer.Tracer("github.com/agora-platform/agora/services/workflow/reactions"))
	subs.UseReviewDue(cfg.ReviewDue)
	if cfg.Agent.Model == nil {
		h.Log.Info("agent steps have no model (AGENT_MODEL_URL is unset): each becomes REQUIRE_HUMAN_REVIEW, nothing acts on a model's word")
	}
	var registrar messaging.SEI
	if cfg.SEI != nil {
		registrar = cfg.SEI
	}
	if err := messaging.Attach(h, messaging.Deps{Store: store, Reactions: subs, SEI: registrar, Log: h.Log}); err != nil {
		return err
	}
	routes := httpapi.NewHandler(httpapi.Deps{Auth: h.Verifier, Processes: store, Schedules: store,
		Subscriptions: subs, Registry: h.Reg, Definitions: cfg.Catalog, Log: h.Log})

	// The SLA watcher stops with the consumers, before the relay: a sweep
	// in flight rolls back (its timers stay due), so no breach is lost.
	h.Go("sla-watcher", func(ctx context.Context) error {
		process.Watch(ctx, "sla", store.SweepSLA, cfg.SLAInterval, cfg.SLABatch, h.Log)
		return nil
	})
	// The watchdog: a step waited on longer than its threshold is reported
	// once (workflow.stuck.v1), stopping like the SLA watcher.
	h.Go("watchdog", func(ctx context.Context) error {
		process.Watch(ctx, "watchdog", store.SweepStuck, cfg.WatchdogInterval, cfg.SLABatch, h.Log)
		return nil
	})
	// Mass reactions, a batch per transaction (resumed after a crash). The
	// requests a committed batch reviewed are the fabric's mass-action
	// items (AgoraMassActionDetected, docs/runbooks.md), beside the
	// workflow's own workflow.reaction.job_requests.
	reviewed := metric.WithAttributes(attribute.String("action", "reaction_review"))
	sweepJobs := func(ctx context.Context, limit int) (int, error) {
		n, err := subs.SweepJobs(ctx, limit)
		if n > 0 {
			h.Metrics.MassActionItems.Add(ctx, int64(n), reviewed)
		}
		return n, err
	}
	h.Go("reaction-jobs", func(ctx context.Context) error {
		process.Watch(ctx, "reaction-jobs", sweepJobs, cfg.JobInterval, cfg.JobBatch, h.Log)
		return nil
	})
	// Approvals and reviews open past their due date: each reported once
	// (workflow.review-overdue.v1) across instances.
	h.Go("review-due", func(ctx context.Context) error {
		process.Watch(ctx, "review-due", subs.SweepOverdue, cfg.ReviewInterval, cfg.SLABatch, h.Log)
		return nil
	})
	// Scheduled events: each due slot fires once across instances.
	h.Go("scheduler", func(ctx context.Context) error {
		process.Watch(ctx, "schedule", store.SweepSchedules, cfg.ScheduleInterval, cfg.SLABatch, h.Log)
		return nil
	})
	return h.Serve(ctx, routes, nil)
}
