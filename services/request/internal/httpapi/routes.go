// Package httpapi is the request service's REST interface.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/gateway"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/telemetry/httpspan"
)

// Deps are what the handlers need.
type Deps struct {
	Auth       *auth.Verifier
	Requests   Requests
	Documents  Uploader
	Operations Operations
	// ExternalEvents is the external-event gateway (pkg/fabric/gateway): it
	// authenticates each event by its source's signature, not a JWT.
	ExternalEvents http.Handler
	Log            *slog.Logger
	// MaxUploadBytes limits one uploaded file (413 beyond).
	MaxUploadBytes int64
	// SubmitLimit, when set, limits each tenant's submissions (429 beyond,
	// with Retry-After); OnThrottle is told of each refusal.
	SubmitLimit Limiter
	OnThrottle  func(ctx context.Context, tenantID string)
}

// Limiter says whether key (a tenant) may go ahead now, or how long until
// it may (ratelimit.PerKey).
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, time.Duration, error)
}

// NewHandler returns every route of the service.
func NewHandler(d Deps) http.Handler {
	r := chi.NewRouter()
	// The host traces each request; name its span after the route.
	r.Use(httpspan.RouteNamer)
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	citizen := d.Auth.Require(auth.RoleCitizen)
	staffOrOwner := d.Auth.Require(auth.RoleCitizen, auth.RoleAttendant, auth.RoleOperator)
	uploaders := d.Auth.Require(auth.RoleCitizen, auth.RoleAttendant)
	operator := d.Auth.Require(auth.RoleOperator)

	r.With(citizen, perTenant(d.SubmitLimit, d.OnThrottle, d.Log)).Method(http.MethodPost, "/v1/requests", handleSubmit(d.Requests, d.Log))
	r.With(staffOrOwner).Method(http.MethodGet, "/v1/requests", handleList(d.Requests, d.Log))
	r.With(staffOrOwner).Method(http.MethodGet, "/v1/requests/{id}", handleGet(d.Requests, d.Log))
	r.With(citizen).Method(http.MethodPost, "/v1/requests/{id}/cancel", handleCancel(d.Requests, d.Log))
	r.With(uploaders).Method(http.MethodPost, "/v1/requests/{id}/documents", handleUpload(d.Documents, d.MaxUploadBytes, d.Log))
	r.With(staffOrOwner).Method(http.MethodGet, "/v1/requests/{id}/documents", handleListDocuments(d.Requests, d.Log))
	r.Method(http.MethodPost, gateway.Path, d.ExternalEvents)
	r.With(staffOrOwner).Method(http.MethodGet, "/v1/requests/{id}/timeline", handleTimeline(d.Operations, d.Log))
	r.With(operator).Method(http.MethodPost, "/v1/requests/{id}/workflow", handleStartWorkflow(d.Operations, d.Log))
	r.With(operator).Method(http.MethodPost, "/v1/requests/{id}/documents/{documentId}/reprocess", handleReprocessDocument(d.Operations, d.Log))
	return r
}
