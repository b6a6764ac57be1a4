package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

const maxBody = 16 << 10

// mayActFor reports whether the caller may read or change citizenID's data:
// staff of the tenant may, a citizen only for themself.
func mayActFor(c auth.Claims, citizenID string) bool {
	return c.Has(auth.RoleAttendant) || c.Has(auth.RoleOperator) || c.Subject == citizenID
}

type contactBody struct {
	Email            string             `json:"email"`
	Phone            string             `json:"phone"`
	PreferredChannel string             `json:"preferredChannel"`
	ProgressNotices  *bool              `json:"progressNotices"`
	QuietHours       *notify.QuietHours `json:"quietHours"`
}

func handlePutContact(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		citizenID := chi.URLParam(r, "citizenId")
		if !mayActFor(claims, citizenID) {
			// 404, not 403: whether another citizen exists is not the caller's business.
			problem.Error(w, r, http.StatusNotFound, "not found")
			return
		}
		var b contactBody
		if err := httpjson.ReadStrict(w, r, maxBody, &b); err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		c := notify.Contact{CitizenID: citizenID, Email: b.Email, Phone: b.Phone, Preferred: notify.Channel(b.PreferredChannel),
			ProgressNotices: b.ProgressNotices, QuietHours: b.QuietHours}
		if err := c.Validate(); err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		out, err := d.Store.PutContact(r.Context(), claims.TenantID, c, claims.Subject)
		if err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, out)
	}
}

func handleGetContact(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		citizenID := chi.URLParam(r, "citizenId")
		if !mayActFor(claims, citizenID) {
			problem.Error(w, r, http.StatusNotFound, "not found")
			return
		}
		c, err := d.Store.Contact(r.Context(), claims.TenantID, citizenID)
		if err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, c)
	}
}

func handleListNotifications(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		id, err := uuid.Parse(r.URL.Query().Get("requestId"))
		if err != nil {
			problem.Error(w, r, http.StatusBadRequest, "query parameter requestId must be a UUID")
			return
		}
		// The canonical spelling: uuid.Parse also takes ones PostgreSQL
		// refuses ("urn:uuid:…").
		requestID := id.String()
		citizenID := ""
		if !claims.Has(auth.RoleAttendant) && !claims.Has(auth.RoleOperator) {
			citizenID = claims.Subject
		}
		items, err := d.Store.Notifications(r.Context(), claims.TenantID, requestID, citizenID)
		if err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"items": items})
	}
}
