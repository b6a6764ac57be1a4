package edge

import (
	"net/http"

	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// Routes answers what no pattern of the fabric's own APIs' mux serves
// with a problem, as every service's own routes do: 405 (keeping the mux's Allow header) for a
// known path and another method, 404 otherwise. The mux's own answers are
// plain text.
func Routes(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" { // a route, or the redirect to a cleaned path
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusOnly{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			if allow := rec.header.Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			problem.MethodNotAllowed(w, r)
			return
		}
		problem.NoRoute(w, r)
	})
}

// statusOnly keeps the status and headers a handler writes, not its body.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header { return s.header }

func (s *statusOnly) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *statusOnly) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(p), nil
}
