// Package httpapi is the ingestion service's REST surface: lineage lookup
// and the history of a tenant's stored events (history.go).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/history"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/postgres"
)

// Store answers lineage queries.
type Store interface {
	Lineage(ctx context.Context, tenantID, eventID string) (postgres.Lineage, error)
}

// History reads pages of a tenant's stored events; *history.Reader is one.
type History interface {
	Page(ctx context.Context, tenantID string, q postgres.HistoryQuery) (history.Page, error)
}

// Deps are what the routes need.
type Deps struct {
	Auth    *auth.Verifier
	Lineage Store
	History History
	Log     *slog.Logger
}

// NewHandler returns the service's routes.
func NewHandler(d Deps) http.Handler {
	r := chi.NewRouter()
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	r.With(d.Auth.Require(auth.RoleAttendant, auth.RoleOperator)).
		Get("/v1/lineage/{eventId}", handleLineage(d.Lineage, d.Log))
	r.With(d.Auth.Require(auth.RoleOperator)).
		Get("/v1/history", handleHistory(d.History, d.Log))
	return r
}

func handleLineage(store Store, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		id, err := uuid.Parse(chi.URLParam(r, "eventId"))
		if err != nil {
			problem.Error(w, r, http.StatusBadRequest, "eventId must be a UUID")
			return
		}
		// The canonical spelling: uuid.Parse also takes ones PostgreSQL
		// refuses ("urn:uuid:…").
		l, err := store.Lineage(r.Context(), claims.TenantID, id.String())
		if err != nil {
			problem.Fail(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, l)
	}
}
