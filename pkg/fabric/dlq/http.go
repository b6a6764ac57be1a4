package dlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/problem"
)

// Handler serves DLQ operations for a service's own queues under
// /admin/dlq/. Mount it behind verifier.Require(auth.RoleOperator): the
// operator identity is the token's subject, and an operator only ever sees
// and acts on letters of the token's tenant.
//
//	GET  /admin/dlq/{queue}                 list (masked)
//	GET  /admin/dlq/{queue}/letters/{id}    show one
//	POST /admin/dlq/{queue}/replay          {"filter":{...},"reason":"...","dryRun":true}
//	POST /admin/dlq/{queue}/purge           same body
//	GET  /admin/dlq/audit                   latest audit rows
func Handler(ops *Ops, queues []string) http.Handler {
	mux := http.NewServeMux()
	allowed := func(w http.ResponseWriter, r *http.Request) (string, auth.Claims, bool) {
		c, ok := auth.FromContext(r.Context())
		if !ok || !c.Has(auth.RoleOperator) {
			problem.Error(w, r, http.StatusForbidden, "DLQ operations require the operator role")
			return "", c, false
		}
		q := r.PathValue("queue")
		if q != "" && !slices.Contains(queues, q) {
			problem.Error(w, r, http.StatusNotFound, fmt.Sprintf("queue %q is not one of this service's queues", q))
			return "", c, false
		}
		return q, c, true
	}
	mux.HandleFunc("GET /admin/dlq/audit", func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := allowed(w, r); !ok {
			return
		}
		entries, err := ops.Audit(r.Context(), "", 100)
		if err != nil {
			problem.Error(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, entries)
	})
	mux.HandleFunc("GET /admin/dlq/{queue}", func(w http.ResponseWriter, r *http.Request) {
		q, c, ok := allowed(w, r)
		if !ok {
			return
		}
		all, err := ops.List(r.Context(), q, 0)
		if err != nil {
			problem.Error(w, r, http.StatusBadGateway, err.Error())
			return
		}
		out := []Letter{}
		for _, l := range all {
			if l.TenantID == c.TenantID {
				out = append(out, l)
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /admin/dlq/{queue}/letters/{id}", func(w http.ResponseWriter, r *http.Request) {
		q, c, ok := allowed(w, r)
		if !ok {
			return
		}
		l, err := ops.Show(r.Context(), q, r.PathValue("id"))
		if errors.Is(err, ErrNotFound) || (err == nil && l.TenantID != c.TenantID) {
			problem.Error(w, r, http.StatusNotFound, "no such letter")
			return
		}
		if err != nil {
			problem.Error(w, r, http.StatusBadGateway, err.Error())
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
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				problem.Error(w, r, http.StatusBadRequest, "body: "+err.Error())
				return
			}
			body.Filter.Tenant = c.TenantID // never beyond the operator's tenant
			rep, err := run(ops, r, Request{Queue: q, Filter: body.Filter, Operator: c.Subject, Reason: body.Reason, DryRun: body.DryRun})
			switch {
			case errors.Is(err, ErrNoReason), errors.Is(err, ErrNoFilter), errors.Is(err, ErrNoOperator):
				problem.Error(w, r, http.StatusUnprocessableEntity, err.Error())
			case errors.Is(err, ErrNotReplayable):
				// The other letters were replayed: the report goes along.
				problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: err.Error(),
					Errors: map[string]any{"report": rep}})
			case err != nil:
				problem.Error(w, r, http.StatusBadGateway, err.Error())
			default:
				writeJSON(w, http.StatusOK, rep)
			}
		}
	}
	mux.HandleFunc("POST /admin/dlq/{queue}/replay", act(func(o *Ops, r *http.Request, req Request) (Report, error) { return o.Replay(r.Context(), req) }))
	mux.HandleFunc("POST /admin/dlq/{queue}/purge", act(func(o *Ops, r *http.Request, req Request) (Report, error) { return o.Purge(r.Context(), req) }))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
