// Package httpapi is the workflow service's REST interface.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/telemetry/httpspan"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// Deps are what the handlers need.
type Deps struct {
	Auth          *auth.Verifier
	Processes     Processes
	Schedules     Schedules
	Subscriptions Subscriptions
	// Registry is the catalog GET /v1/explain/{type} describes, and
	// Definitions the processes whose steps may wait for its types.
	Registry    *registry.Registry
	Definitions *process.Catalog
	Log         *slog.Logger
}

// NewHandler returns every route of the service.
func NewHandler(d Deps) http.Handler {
	r := chi.NewRouter()
	// The host traces each request; name its span after the route.
	r.Use(httpspan.RouteNamer)
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	anyone := d.Auth.Require(auth.RoleCitizen, auth.RoleAttendant, auth.RoleOperator)
	staff := d.Auth.Require(auth.RoleAttendant, auth.RoleOperator)

	r.With(anyone).Method(http.MethodGet, "/v1/processes", handleListProcesses(d.Processes, d.Log))
	r.With(staff).Method(http.MethodGet, "/v1/tasks", handleWorklist(d.Processes, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/tasks/{id}/claim", handleClaim(d.Processes, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/tasks/{id}/release", handleRelease(d.Processes, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/tasks/{id}/complete", handleCompleteTask(d.Processes, d.Log))
	operator := d.Auth.Require(auth.RoleOperator)
	r.With(operator).Method(http.MethodPost, "/v1/schedules", handleCreateSchedule(d.Schedules, d.Log))
	r.With(operator).Method(http.MethodGet, "/v1/schedules", handleListSchedules(d.Schedules, d.Log))
	r.With(operator).Method(http.MethodPost, "/v1/schedules/{id}/disable", handleDisableSchedule(d.Schedules, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/subscriptions", handleCreateSubscription(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodGet, "/v1/subscriptions", handleListSubscriptions(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodGet, "/v1/subscriptions/{id}", handleSubscriptionHistory(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/subscriptions/{id}/versions", handleCreateSubscription(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/subscriptions/{id}/versions/{version}/transitions", handleTransition(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/subscriptions/{id}/rollback", handleRollback(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodGet, "/v1/explain/{type}", handleExplain(d.Registry, d.Definitions, d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodGet, "/v1/decisions", handleDecisions(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodGet, "/v1/reviews", handleReviews(d.Subscriptions, d.Log))
	r.With(staff).Method(http.MethodPost, "/v1/reviews/{id}/resolve", handleResolve(d.Subscriptions, d.Log))
	return r
}
