// Package httpapi is the ai-builder's HTTP port: the synchronous chat API.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// NewHandler returns every route of the service. require is the token
// middleware (auth.Verifier.Require).
func NewHandler(require func(roles ...string) func(http.Handler) http.Handler, chat Asker, log *slog.Logger) http.Handler {
	r := chi.NewRouter()
	r.NotFound(problem.NoRoute)
	r.MethodNotAllowed(problem.MethodNotAllowed)
	r.With(require(auth.RoleAttendant)).Method(http.MethodPost, "/v1/chat", handleChat(chat, log))
	return r
}
