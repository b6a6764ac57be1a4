package host

// What the host serves to operators and integrators beside a service's own
// routes: the OpenAPI document, the DLQ API, the operations views, replays
// from history and the operator console.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/internal/console"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/internal/ops"
	"github.com/agora-platform/agora/pkg/fabric/internal/replay"
	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/sweep"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// apiDocument merges the service's OpenAPI document with the host's routes:
// the DLQ API's for its queues, when it consumes (see dlqHandler).
func apiDocument(service string, opts Options) ([]byte, error) {
	doc := opts.OpenAPI
	if len(doc) == 0 {
		doc = fmt.Appendf(nil, `{"openapi": "3.1.0", "info": {"title": %q, "version": "1"}, "paths": {}}`, service)
	}
	queues := queueNamesOf(opts.Consumers)
	return openapi.Document(doc, openapi.Host{Queues: queues, Ops: len(queues) > 0 || opts.Relay})
}

// dlqHandler is the DLQ API (package dlq) for the service's own queues,
// served under dlq.PathPrefix by every service that consumes (nil for one
// that does not). It admits only a verified token with the operator role;
// the handler keeps the operator to their tenant's letters and audit rows.
// Without JWT_KEYS no token can be verified, so every call is refused.
func (h *host) dlqHandler() http.Handler {
	if len(h.opts.Consumers) == 0 {
		return nil
	}
	if h.Verifier == nil {
		h.Log.Warn("DLQ API refuses every call: JWT_KEYS is not set")
		return unverifiable("DLQ operations")
	}
	return h.Verifier.Require(auth.RoleOperator)(dlq.Handler(dlq.New(h.Conn, h.Pub, h.Reg, h.Pool, h.Cfg.Schema), h.queueNames()))
}

// opsHandler is the operations views (package ops) of a service that
// consumes or relays, for the operator of a tenant; like the DLQ API it
// refuses every call without JWT_KEYS.
func (h *host) opsHandler() http.Handler {
	svc := ops.Service{Name: h.Cfg.Service, Schema: h.Cfg.Schema, Queues: h.queueNames(), Relay: h.opts.Relay,
		Pool: h.Pool, Broker: h.Conn, Letters: dlq.New(h.Conn, h.Pub, h.Reg, h.Pool, h.Cfg.Schema)}
	if !svc.Serves() {
		return nil
	}
	if h.Verifier == nil {
		return unverifiable("operations views")
	}
	return h.Verifier.Require(auth.RoleOperator)(ops.Handler(svc))
}

// replayHandler is the replays from history (package replay) of the
// service's queues, for the operator of a tenant, with the sweep that works
// through their jobs; nil for a service that does not consume. Like the DLQ
// API it refuses every call without JWT_KEYS.
func (h *host) replayHandler() http.Handler {
	if len(h.opts.Consumers) == 0 {
		return nil
	}
	var history replay.History
	if h.Cfg.HistoryURL != "" {
		history = replay.HTTPHistory{BaseURL: h.Cfg.HistoryURL}
	}
	// Jobs are rare: the sweep that runs them backs off to 15 s while
	// there are none, and a job ordered on this instance wakes it at once.
	wake := make(chan struct{}, 1)
	started := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	svc := replay.New(h.Pool, h.Cfg.Schema, h.opts.Consumers, h.Reg, h.Pub, history, replay.Options{Simulatable: h.simulatable, Started: started})
	h.Go("replay", func(ctx context.Context) error {
		sweep.RunIdle(ctx, time.Second, 15*time.Second, wake, 100, svc.Sweep, func(err error) { h.Log.Error("replay sweep failed", "err", err) }, nil)
		return nil
	})
	if h.Verifier == nil {
		return unverifiable("replays")
	}
	return h.Verifier.Require(auth.RoleOperator)(replay.Handler(svc))
}

// unverifiable refuses every call to what: without JWT_KEYS no token can
// be verified.
func unverifiable(what string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		problem.Error(w, r, http.StatusUnauthorized, what+" need a verified token, and this service has no JWT_KEYS to verify one")
	})
}

// console is the operator console over the services of CONSOLE_SERVICES
// and this one, reached at its bound address unless listed.
func (h *host) console(addr net.Addr) (http.Handler, error) {
	targets := h.Cfg.Console
	if !slices.ContainsFunc(targets, func(t console.Target) bool { return t.Name == h.Cfg.Service }) {
		tcp := addr.(*net.TCPAddr)
		ip := tcp.IP
		if ip.IsUnspecified() {
			ip = net.IPv4(127, 0, 0, 1)
		}
		self := "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
		targets = append([]console.Target{{Name: h.Cfg.Service, URL: self}}, targets...)
	}
	return console.Handler(console.Options{Targets: targets, Verifier: h.Verifier, Log: h.Log})
}

func (h *host) queueNames() []string { return queueNamesOf(h.opts.Consumers) }

func queueNamesOf(consumers []topology.Consumer) []string {
	queues := make([]string, len(consumers))
	for i, c := range consumers {
		queues[i] = c.Queue
	}
	return queues
}

// archiveDeadLetters archives, every interval, the letters of the
// service's DLQs dead-lettered more than age ago: each goes to the data
// lake as platform.dead-letter-archived.v1, confirmed, before it leaves
// its DLQ (dlq.Ops.Archive), and each run is audited. The first run is
// one interval after the start, as retention's.
func (h *host) archiveDeadLetters(ctx context.Context, interval, age time.Duration) error {
	ops := dlq.New(h.Conn, h.Pub, h.Reg, h.Pool, h.Cfg.Schema)
	archive := func(ctx context.Context, _ int) (int, error) {
		var archived int
		var errs []error
		for _, q := range h.queueNames() {
			rep, err := ops.Archive(ctx, q, time.Now().Add(-age), h.Cfg.Service)
			if err != nil {
				errs = append(errs, fmt.Errorf("dlq archive %s: %w", q, err))
			}
			if rep.Succeeded > 0 || rep.Failed > 0 {
				h.Log.Info("dlq archive", "queue", q, "archived", rep.Succeeded, "kept", rep.Failed, "audit", rep.AuditID)
			}
			archived += rep.Succeeded
		}
		return archived, errors.Join(errs...)
	}
	// One round walks every DLQ whole: it is never "a full batch" that
	// calls for another at once.
	sweep.Run(ctx, interval, math.MaxInt, archive, func(err error) { h.Log.Warn("dlq archive", "err", err) }, nil)
	return nil
}
