// Package httpapi is the analytics service's REST surface.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// Store reads the projection.
type Store interface {
	Counts(ctx context.Context, tenantID string, r projection.Range) ([]projection.Row, error)
}

// Authenticator returns middleware admitting bearers of one of roles;
// *auth.Verifier is one.
type Authenticator interface {
	Require(roles ...string) func(http.Handler) http.Handler
}

// NewHandler returns the service's routes: the report query and the
// report exports.
func NewHandler(store Store, exports ExportDeps, authn Authenticator, log *slog.Logger) http.Handler {
	r := chi.NewRouter()
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	staff := r.With(authn.Require(auth.RoleAttendant, auth.RoleOperator))
	staff.Get("/v1/analytics/requests", handleRequests(store, log))
	staff.Post(ExportsPath, handleCreateExport(exports, log))
	staff.Get(ExportsPath+"/{id}", handleGetExport(exports, log))
	return r
}

func handleRequests(store Store, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		rng, err := projection.ParseRange(r.URL.Query().Get("from"), r.URL.Query().Get("to"))
		if errors.Is(err, projection.ErrInvalid) {
			problem.Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		rows, err := store.Counts(r.Context(), claims.TenantID, rng)
		if err != nil {
			log.Error("analytics query", "err", err)
			problem.Fail(w, r, nil, err)
			return
		}
		httpjson.Write(w, http.StatusOK, projection.NewReport(rng, rows))
	}
}
