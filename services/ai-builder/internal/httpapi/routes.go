// Package httpapi is the ai-builder's HTTP port: the synchronous chat API.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// Deps are what the routes need.
type Deps struct {
	Auth *auth.Verifier
	Chat Asker
	Log  *slog.Logger
}

// NewHandler returns every route of the service.
func NewHandler(d Deps) http.Handler {
	r := chi.NewRouter()
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	r.With(d.Auth.Require(auth.RoleAttendant)).Method(http.MethodPost, "/v1/chat", handleChat(d.Chat, d.Log))
	return r
}
