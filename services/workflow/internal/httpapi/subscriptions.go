package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/subscription"
)

// Subscriptions are the tenant's reactive subscriptions.
type Subscriptions interface {
	Create(ctx context.Context, a process.Actor, spec subscription.Spec) (subscription.Version, error)
	AddVersion(ctx context.Context, a process.Actor, id string, spec subscription.Spec) (subscription.Version, error)
	List(ctx context.Context, tenantID string) ([]subscription.Version, error)
	History(ctx context.Context, tenantID, id string) ([]subscription.Version, []subscription.Transition, error)
	Move(ctx context.Context, a process.Actor, id string, version int, to subscription.State, reason string) (subscription.Version, error)
	Rollback(ctx context.Context, a process.Actor, id, reason string) (subscription.Version, error)
	Active(ctx context.Context, tenantID, typ string) ([]subscription.Version, error)
	Decisions(ctx context.Context, tenantID, correlationID, eventID string) ([]subscription.Decision, error)
	Reviews(ctx context.Context, a process.Actor) ([]subscription.Review, error)
	Resolve(ctx context.Context, a process.Actor, id string, approve bool, reason string) (subscription.Review, error)
}

// handleReviews serves GET /v1/reviews: the open approvals and reviews
// for the caller's roles.
func handleReviews(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := store.Reviews(r.Context(), actor(r))
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, list)
	})
}

// handleResolve serves POST /v1/reviews/{id}/resolve {approve, reason}.
func handleResolve(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Approve *bool  `json:"approve"`
			Reason  string `json:"reason"`
		}
		if err := readBody(w, r, &body); err != nil {
			writeError(w, r, log, err)
			return
		}
		if body.Approve == nil {
			problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: "say whether you approve",
				Errors: map[string]any{"approve": "true or false"}})
			return
		}
		if !reasonGiven(w, r, body.Reason) {
			return
		}
		rv, err := store.Resolve(r.Context(), actor(r), chi.URLParam(r, "id"), *body.Approve, body.Reason)
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, rv)
	})
}

// handleDecisions serves GET /v1/decisions?correlationId= (or ?eventId=):
// every decision the reactive fabric recorded, for the token's tenant:
// which event, which subscription version, what the policy decided (and
// by which rule), who decided, what came of it.
func handleDecisions(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		correlationID, eventID := r.URL.Query().Get("correlationId"), r.URL.Query().Get("eventId")
		if (correlationID == "") == (eventID == "") || len(correlationID) > 200 {
			problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: "give one of correlationId or eventId",
				Errors: map[string]any{"correlationId": "a correlation id", "eventId": "an event id"}})
			return
		}
		list, err := store.Decisions(r.Context(), actor(r).TenantID, correlationID, eventID)
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, list)
	})
}

// reasonGiven answers 422 unless reason fits the audit (1 to
// process.MaxReasonLen characters).
func reasonGiven(w http.ResponseWriter, r *http.Request, reason string) bool {
	if reason == "" || len(reason) > process.MaxReasonLen {
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: "a reason is required",
			Errors: map[string]any{"reason": fmt.Sprintf("1 to %d characters, recorded in the audit", process.MaxReasonLen)}})
		return false
	}
	return true
}

// subscriptionError answers the subscription domain's refusals by role;
// its other errors are of the fabric's kinds.
func subscriptionError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, subscription.ErrFourEyes), errors.Is(err, subscription.ErrNotYourRole):
		problem.Error(w, r, http.StatusForbidden, err.Error())
	default:
		writeError(w, r, log, err)
	}
}

func handleCreateSubscription(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var spec subscription.Spec
		if err := readBody(w, r, &spec); err != nil {
			writeError(w, r, log, err)
			return
		}
		var (
			v   subscription.Version
			err error
		)
		if id := chi.URLParam(r, "id"); id != "" {
			v, err = store.AddVersion(r.Context(), actor(r), id, spec)
		} else {
			v, err = store.Create(r.Context(), actor(r), spec)
		}
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusCreated, v)
	})
}

func handleListSubscriptions(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := store.List(r.Context(), actor(r).TenantID)
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, list)
	})
}

func handleSubscriptionHistory(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		versions, transitions, err := store.History(r.Context(), actor(r).TenantID, chi.URLParam(r, "id"))
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"versions": versions, "transitions": transitions})
	})
}

type transitionBody struct {
	To     subscription.State `json:"to"`
	Reason string             `json:"reason"`
}

func handleTransition(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is read first, as on every route: a malformed one gets
		// the same answer whatever the path names.
		var body transitionBody
		if err := readBody(w, r, &body); err != nil {
			writeError(w, r, log, err)
			return
		}
		version, err := strconv.Atoi(chi.URLParam(r, "version"))
		if err != nil || version < 1 {
			problem.Error(w, r, http.StatusNotFound, "no such subscription version")
			return
		}
		if !reasonGiven(w, r, body.Reason) {
			return
		}
		v, err := store.Move(r.Context(), actor(r), chi.URLParam(r, "id"), version, body.To, body.Reason)
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, v)
	})
}

func handleRollback(store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		if err := readBody(w, r, &body); err != nil {
			writeError(w, r, log, err)
			return
		}
		if !reasonGiven(w, r, body.Reason) {
			return
		}
		v, err := store.Rollback(r.Context(), actor(r), chi.URLParam(r, "id"), body.Reason)
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, v)
	})
}

// explained is GET /v1/explain/{type}: what an event is, and what happens
// when one comes (seed 004 §64): the platform's queues that receive it,
// the workflow steps that wait for it, and what the tenant's active
// subscriptions make of it.
type explained struct {
	Definition registry.Definition `json:"definition"`
	Schema     json.RawMessage     `json:"schema"`
	// Consumers are "<service>/<queue>", from the catalog.
	Consumers     []string            `json:"consumers"`
	WaitingSteps  []process.Waiting   `json:"waitingSteps"`
	Subscriptions []explainedReaction `json:"subscriptions"`
}

type explainedReaction struct {
	ID       string                `json:"id"`
	Version  int                   `json:"version"`
	Name     string                `json:"name"`
	Filter   string                `json:"filter"`
	Policy   subscription.Policy   `json:"policy"`
	Reaction subscription.Reaction `json:"reaction"`
	// Emits are the types the reaction can lead the workflow to emit.
	Emits []string `json:"emits"`
}

func handleExplain(reg *registry.Registry, definitions *process.Catalog, store Subscriptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		typ := chi.URLParam(r, "type")
		def, ok := reg.Lookup(typ)
		if !ok {
			problem.Error(w, r, http.StatusNotFound, "no such type in the catalog")
			return
		}
		subs, err := store.Active(r.Context(), actor(r).TenantID, typ)
		if err != nil {
			subscriptionError(w, r, log, err)
			return
		}
		out := explained{Definition: def, Schema: def.Schema, Consumers: append([]string{}, def.Consumers...),
			WaitingSteps: definitions.WaitingFor(typ), Subscriptions: []explainedReaction{}}
		for _, s := range subs {
			out.Subscriptions = append(out.Subscriptions, explainedReaction{ID: s.ID, Version: s.Version, Name: s.Name,
				Filter: s.Filter, Policy: s.Policy, Reaction: s.Reaction, Emits: s.Reaction.Emits()})
		}
		httpjson.Write(w, http.StatusOK, out)
	})
}
