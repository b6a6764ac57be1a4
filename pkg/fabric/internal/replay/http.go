package replay

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// PathPrefix is where a consuming service serves its replays.
const PathPrefix = "/v1/replays"

// Handler serves s's replays to the operators of a tenant. Mount it behind
// the verifier's Require(auth.RoleOperator) (the host does): every job is
// the token's tenant's, and another tenant's is "not found".
//
//	POST /v1/replays                  {"queue","mode","selection":{types,correlationId,from,to},"reason"} → 202 the job
//	GET  /v1/replays                  the tenant's latest jobs
//	GET  /v1/replays/{id}             a job and its progress (outcomes by kind)
//	GET  /v1/replays/{id}/items       ?after=&limit= each event and what became of it
//	POST /v1/replays/{id}/cancel      stop a running job where it is
func Handler(s *Service) http.Handler {
	mux := http.NewServeMux()
	claims := func(w http.ResponseWriter, r *http.Request) (auth.Claims, bool) {
		c, ok := auth.FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
			problem.Error(w, r, http.StatusUnauthorized, "a bearer token is required")
			return c, false
		}
		if !c.Has(auth.RoleOperator) || c.TenantID == "" {
			problem.Error(w, r, http.StatusForbidden, "replays require the operator role of a tenant")
			return c, false
		}
		return c, true
	}
	mux.HandleFunc("POST "+PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		c, ok := claims(w, r)
		if !ok {
			return
		}
		var req Request
		if err := httpjson.ReadStrict(w, r, 64<<10, &req); err != nil {
			fail(w, r, err)
			return
		}
		bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		job, err := s.Start(r.Context(), Actor{Subject: c.Subject, TenantID: c.TenantID, Elevated: c.Has(auth.RoleReplayAdmin),
			BearerToken: bearer}, req, nil)
		if err != nil {
			fail(w, r, err)
			return
		}
		w.Header().Set("Location", PathPrefix+"/"+job.ID)
		httpjson.Write(w, http.StatusAccepted, job)
	})
	// read serves a route answered 200 with what do returns for the
	// token's tenant.
	read := func(pattern string, do func(r *http.Request, tenantID string) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			c, ok := claims(w, r)
			if !ok {
				return
			}
			v, err := do(r, c.TenantID)
			if err != nil {
				fail(w, r, err)
				return
			}
			httpjson.Write(w, http.StatusOK, v)
		})
	}
	read("GET "+PathPrefix, func(r *http.Request, tenantID string) (any, error) {
		return s.List(r.Context(), tenantID, 100)
	})
	read("GET "+PathPrefix+"/{id}", func(r *http.Request, tenantID string) (any, error) {
		return s.Get(r.Context(), tenantID, r.PathValue("id"))
	})
	read("POST "+PathPrefix+"/{id}/cancel", func(r *http.Request, tenantID string) (any, error) {
		return s.Cancel(r.Context(), tenantID, r.PathValue("id"))
	})
	read("GET "+PathPrefix+"/{id}/items", func(r *http.Request, tenantID string) (any, error) {
		after, limit := 0, 100
		for name, dst := range map[string]*int{"after": &after, "limit": &limit} {
			if v := r.URL.Query().Get(name); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || (name == "limit" && (n < 1 || n > 1000)) {
					return nil, errBadQuery
				}
				*dst = n
			}
		}
		return s.Items(r.Context(), tenantID, r.PathValue("id"), after, limit)
	})
	return edge.Routes(mux)
}

// errBadQuery: the items' paging parameters are not numbers in range.
var errBadQuery = errors.New("bad query parameter")

// fail answers err as a problem.
func fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *HistoryError
	switch {
	case errors.Is(err, errBadQuery):
		problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: err.Error(),
			Errors: map[string]any{"after": "a sequence number ≥ 0", "limit": "1 to 1000"}})
	case errors.Is(err, ErrNotFound):
		problem.Error(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrForbidden):
		problem.Error(w, r, http.StatusForbidden, err.Error())
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotReplayable), errors.Is(err, ErrTooMany):
		problem.Error(w, r, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, ErrNoHistory):
		problem.Error(w, r, http.StatusServiceUnavailable, err.Error())
	case errors.As(err, &he):
		problem.Error(w, r, http.StatusBadGateway, fmt.Sprintf("the data lake's history answered %d: %s", he.Status, he.Detail))
	default: // the fabric's kinds, a refused body, or a failure
		problem.Fail(w, r, nil, err)
	}
}
