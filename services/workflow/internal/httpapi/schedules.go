package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/services/workflow/internal/process"
	"github.com/agora-platform/agora/services/workflow/internal/schedule"
)

// Schedules are the tenant's scheduled events.
type Schedules interface {
	CreateSchedule(ctx context.Context, a process.Actor, spec schedule.Spec) (schedule.Schedule, error)
	Schedules(ctx context.Context, tenantID string) ([]schedule.Schedule, error)
	DisableSchedule(ctx context.Context, tenantID, id string) (schedule.Schedule, error)
}

// handleCreateSchedule serves POST /v1/schedules.
func handleCreateSchedule(store Schedules, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var spec schedule.Spec
		if err := readBody(w, r, &spec); err != nil {
			writeError(w, r, log, err)
			return
		}
		sc, err := store.CreateSchedule(r.Context(), actor(r), spec)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		w.Header().Set("Location", "/v1/schedules/"+sc.ID)
		httpjson.Write(w, http.StatusCreated, sc)
	})
}

// handleListSchedules serves GET /v1/schedules.
func handleListSchedules(store Schedules, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := store.Schedules(r.Context(), actor(r).TenantID)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, list)
	})
}

// handleDisableSchedule serves POST /v1/schedules/{id}/disable.
func handleDisableSchedule(store Schedules, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No body is needed; an empty object is tolerated, anything else
		// refused as on every route.
		var body struct{}
		if err := readBody(w, r, &body); err != nil {
			writeError(w, r, log, err)
			return
		}
		sc, err := store.DisableSchedule(r.Context(), actor(r).TenantID, chi.URLParam(r, "id"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, sc)
	})
}
