package dlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/internal/edge"
	"github.com/agora-platform/agora/pkg/fabric/internal/retryable"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// PathPrefix is where every consuming service serves its DLQ operations
// (the host mounts Handler there; docs/architecture.md, "Failure classes
// and dead letters").
const PathPrefix = "/v1/dlq/"

// Handler serves DLQ operations for a service's own queues under
// PathPrefix. Mount it behind verifier.Require(auth.RoleOperator) (the
// host does): the bearer must be an operator, the operator identity
// recorded in audit rows and replay headers is the token's subject, and an
// operator only ever sees and acts on letters and audit rows of the
// token's tenant. Without verified claims in the request context it
// answers 401, never serving anything unauthenticated.
//
//	GET  /v1/dlq/{queue}                 list (masked)
//	GET  /v1/dlq/{queue}/letters/{id}    show one
//	POST /v1/dlq/{queue}/replay          {"filter":{...},"reason":"...","dryRun":true}
//	POST /v1/dlq/{queue}/purge           same body
//	GET  /v1/dlq/audit                   latest audit rows of the tenant's operations
func Handler(ops *Ops, queues []string) http.Handler {
	mux := http.NewServeMux()
	allowed := func(w http.ResponseWriter, r *http.Request) (string, auth.Claims, bool) {
		c, ok := auth.FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
			problem.Error(w, r, http.StatusUnauthorized, "a bearer token is required")
			return "", c, false
		}
		// A token without a tenant would make every tenant filter below
		// match everything: refused, whatever its roles.
		if !c.Has(auth.RoleOperator) || c.TenantID == "" {
			problem.Error(w, r, http.StatusForbidden, "DLQ operations require the operator role of a tenant")
			return "", c, false
		}
		q := r.PathValue("queue")
		if q != "" && !slices.Contains(queues, q) {
			problem.Error(w, r, http.StatusNotFound, fmt.Sprintf("queue %q is not one of this service's queues", q))
			return "", c, false
		}
		return q, c, true
	}
	mux.HandleFunc("GET "+PathPrefix+"audit", func(w http.ResponseWriter, r *http.Request) {
		_, c, ok := allowed(w, r)
		if !ok {
			return
		}
		entries, err := ops.TenantAudit(r.Context(), c.TenantID, queues, 100)
		if err != nil {
			problem.Fail(w, r, nil, err)
			return
		}
		writeJSON(w, http.StatusOK, entries)
	})
	mux.HandleFunc("GET "+PathPrefix+"{queue}", func(w http.ResponseWriter, r *http.Request) {
		q, c, ok := allowed(w, r)
		if !ok {
			return
		}
		all, err := ops.List(r.Context(), q, 0)
		if err != nil {
			brokerFailure(w, r, err)
			return
		}
		out := []Letter{}
		for _, l := range all {
			if l.BelongsTo(c.TenantID) {
				out = append(out, l)
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET "+PathPrefix+"{queue}/letters/{id}", func(w http.ResponseWriter, r *http.Request) {
		q, c, ok := allowed(w, r)
		if !ok {
			return
		}
		l, err := ops.Show(r.Context(), q, r.PathValue("id"))
		// Another tenant's letter is "not found", not "forbidden": an
		// operator learns nothing about other tenants' letters.
		if errors.Is(err, ErrNotFound) || (err == nil && !l.BelongsTo(c.TenantID)) {
			if err == nil {
				security.CrossTenant(r.Context(), "dlq_letter")
			}
			problem.Error(w, r, http.StatusNotFound, "no such letter")
			return
		}
		if err != nil {
			brokerFailure(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, l)
	})
	act := func(run func(*Ops, *http.Request, Request) (Report, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			q, c, ok := allowed(w, r)
			if !ok {
				return
			}
			var body struct {
				Filter Filter `json:"filter"`
				Reason string `json:"reason"`
				DryRun bool   `json:"dryRun"`
			}
			if err := httpjson.ReadStrict(w, r, 64<<10, &body); err != nil {
				problem.Fail(w, r, nil, err)
				return
			}
			// The tenant does not count: it is replaced by the operator's
			// below, so {"tenant": …} alone would select every letter of
			// the operator's tenant. Selecting every letter takes "all": true.
			narrowing := body.Filter
			narrowing.Tenant = ""
			if narrowing.empty() {
				problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: "a filter is required",
					Errors: map[string]any{"filter": "name ids, a reason, a type, or all: true"}})
				return
			}
			if body.Filter.Tenant != "" && body.Filter.Tenant != c.TenantID {
				security.CrossTenant(r.Context(), "dlq_filter")
			}
			body.Filter.Tenant = c.TenantID // never beyond the operator's tenant
			req := Request{Queue: q, Filter: body.Filter, Operator: c.Subject, Reason: body.Reason, DryRun: body.DryRun}
			if streams(r) {
				// The outcome goes as the stream's last line, after the
				// progress lines, exactly as it would have been answered.
				st := newStream(w)
				req.Progress = st.progress
				out := &capture{header: http.Header{}}
				rep, err := run(ops, r, req)
				answer(out, r, req, rep, err)
				st.result(out)
				return
			}
			rep, err := run(ops, r, req)
			answer(w, r, req, rep, err)
		}
	}
	mux.HandleFunc("POST "+PathPrefix+"{queue}/replay", act(func(o *Ops, r *http.Request, req Request) (Report, error) { return o.Replay(r.Context(), req) }))
	mux.HandleFunc("POST "+PathPrefix+"{queue}/purge", act(func(o *Ops, r *http.Request, req Request) (Report, error) { return o.Purge(r.Context(), req) }))
	return edge.Routes(mux)
}

// answer writes the outcome of a replay or purge.
func answer(w http.ResponseWriter, r *http.Request, req Request, rep Report, err error) {
	missing := missingIDs(req.Filter.IDs, rep)
	switch {
	case errors.Is(err, ErrNoReason), errors.Is(err, ErrNoFilter), errors.Is(err, ErrNoOperator):
		problem.Error(w, r, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, ErrNotReplayable):
		// The other letters were replayed: the report goes along.
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: err.Error(),
			Errors: map[string]any{"report": rep}})
	case err != nil:
		brokerFailure(w, r, err)
	case len(missing) > 0:
		// Named letters that are not the operator's tenant's (or
		// not there) are refused as not found; the audit row has
		// the attempt, the report what was done with the rest.
		problem.Write(w, r, problem.Details{Status: http.StatusNotFound,
			Detail: "no such letter in this queue for your tenant: " + strings.Join(missing, ", "),
			Errors: map[string]any{"report": rep}})
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}

// missingIDs returns the ids a request named that its walk neither
// matched nor refused.
func missingIDs(ids []string, rep Report) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(rep.Matched, id) && !slices.Contains(rep.Refused, id) {
			out = append(out, id)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// brokerFailure answers a failed broker operation. A broker that is
// unreachable, restarting or dropped the connection mid-operation passes:
// 503 with Retry-After, as for a database outage (problem.Fail). A
// refusal (a permission, a precondition) does not: 502 with the broker's
// reason.
func brokerFailure(w http.ResponseWriter, r *http.Request, err error) {
	if retryable.Is(err) {
		w.Header().Set("Retry-After", "1")
		problem.Error(w, r, http.StatusServiceUnavailable, "the message broker is briefly unavailable; retry")
		return
	}
	problem.Error(w, r, http.StatusBadGateway, err.Error())
}
