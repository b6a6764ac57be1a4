// Package httpapi is the analytics service's REST surface.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// Reports reads the projection.
type Reports interface {
	Counts(ctx context.Context, tenantID string, r projection.Range) ([]projection.Row, error)
}

// Authenticator returns middleware admitting bearers of one of roles;
// *auth.Verifier is one.
type Authenticator interface {
	Require(roles ...string) func(http.Handler) http.Handler
}

// Deps are what the routes need.
type Deps struct {
	Auth    Authenticator
	Reports Reports
	Exports Exports
	Links   Links
	Bucket  string        // the bucket of the export files
	LinkTTL time.Duration // how long a download link works
	Log     *slog.Logger
}

// NewHandler returns the service's routes: the report query and the
// report exports.
func NewHandler(d Deps) http.Handler {
	r := chi.NewRouter()
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	staff := r.With(d.Auth.Require(auth.RoleAttendant, auth.RoleOperator))
	staff.Get("/v1/analytics/requests", handleRequests(d))
	staff.Post(ExportsPath, handleCreateExport(d))
	staff.Get(ExportsPath+"/{id}", handleGetExport(d))
	return r
}

func handleRequests(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		rng, err := projection.ParseRange(r.URL.Query().Get("from"), r.URL.Query().Get("to"))
		if errors.Is(err, projection.ErrInvalid) {
			problem.Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		rows, err := d.Reports.Counts(r.Context(), claims.TenantID, rng)
		if err != nil {
			d.Log.Error("analytics query", "err", err)
			problem.Fail(w, r, nil, err)
			return
		}
		httpjson.Write(w, http.StatusOK, projection.NewReport(rng, rows))
	}
}
