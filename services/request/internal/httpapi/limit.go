package httpapi

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// perTenant refuses a tenant's calls over its rate with 429, a
// Retry-After and a problem naming the limit, so one tenant's flood never
// reaches the queues every tenant shares. Without a limiter it lets
// everything through. A limiter that cannot answer (the database is
// briefly away) lets the call through: refusing every tenant would be
// worse than pacing none for a moment.
func perTenant(l Limiter, onThrottle func(context.Context, string), log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tenantID := actor(r).TenantID
			ok, wait, err := l.Allow(r.Context(), tenantID)
			if err != nil {
				log.WarnContext(r.Context(), "rate limit unavailable; letting the call through", "tenant", tenantID, "err", err)
				next.ServeHTTP(w, r)
				return
			}
			if !ok {
				if onThrottle != nil {
					onThrottle(r.Context(), tenantID)
				}
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				problem.Error(w, r, http.StatusTooManyRequests, "this tenant is submitting faster than its limit; retry after the Retry-After seconds")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
