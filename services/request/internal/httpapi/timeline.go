package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/services/request/internal/request"
)

// Operations are what staff may ask of a request beyond reading it.
type Operations interface {
	Timeline(ctx context.Context, a request.Actor, id string) ([]request.Entry, error)
	StartWorkflow(ctx context.Context, a request.Actor, id string) (string, error)
	ReprocessDocument(ctx context.Context, a request.Actor, requestID, documentID string) (string, error)
}

type timelineView struct {
	RequestID string          `json:"requestId"`
	Entries   []request.Entry `json:"entries"`
}

// handleTimeline serves GET /v1/requests/{id}/timeline: the request's
// events in order, every one for staff, the citizen-visible ones for the
// citizen who submitted it.
func handleTimeline(ops Operations, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		entries, err := ops.Timeline(r.Context(), actor(r), id)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, timelineView{RequestID: id, Entries: entries})
	})
}

type commandAccepted struct {
	CommandID string `json:"commandId"`
	Type      string `json:"type"`
}

// handleStartWorkflow serves POST /v1/requests/{id}/workflow (operators):
// the command path that starts a request's process when its submission
// did not (an integration's request, a start that was dead-lettered). The
// workflow starts at most one process per request.
func handleStartWorkflow(ops Operations, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := ops.StartWorkflow(r.Context(), actor(r), chi.URLParam(r, "id"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusAccepted, commandAccepted{CommandID: id, Type: request.TypeStartWorkflow})
	})
}

// handleReprocessDocument serves POST
// /v1/requests/{id}/documents/{documentId}/reprocess (operators): the
// document worker extracts the document's text again.
func handleReprocessDocument(ops Operations, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := ops.ReprocessDocument(r.Context(), actor(r), chi.URLParam(r, "id"), chi.URLParam(r, "documentId"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusAccepted, commandAccepted{CommandID: id, Type: request.TypeProcessDocument})
	})
}
