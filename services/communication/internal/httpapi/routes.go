// Package httpapi is the communication service's REST surface.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

// Store is what the API reads and writes.
type Store interface {
	PutContact(ctx context.Context, tenantID string, c notify.Contact, by string) (notify.Contact, error)
	Contact(ctx context.Context, tenantID, citizenID string) (notify.Contact, error)
	Notifications(ctx context.Context, tenantID, requestID, citizenID string) ([]notify.Notification, error)
}

// Authenticator returns middleware admitting bearers of one of roles;
// *auth.Verifier is one.
type Authenticator interface {
	Require(roles ...string) func(http.Handler) http.Handler
}

// Deps are what the routes need.
type Deps struct {
	Auth  Authenticator
	Store Store
	Log   *slog.Logger
}

// NewHandler returns the service's routes.
func NewHandler(d Deps) http.Handler {
	r := chi.NewRouter()
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	r.Group(func(r chi.Router) {
		r.Use(d.Auth.Require(auth.RoleCitizen, auth.RoleAttendant))
		r.Put("/v1/contacts/{citizenId}", handlePutContact(d))
		r.Get("/v1/contacts/{citizenId}", handleGetContact(d))
	})
	r.With(d.Auth.Require(auth.RoleCitizen, auth.RoleAttendant, auth.RoleOperator)).
		Get("/v1/notifications", handleListNotifications(d))
	return r
}
