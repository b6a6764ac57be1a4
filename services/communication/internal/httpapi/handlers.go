package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/communication/internal/notify"
)

const maxBody = 16 << 10

// fail maps domain errors to problem responses: the one place that does.
func fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, notify.ErrInvalid):
		problem.Error(w, r, http.StatusBadRequest, err.Error())
	case errors.Is(err, notify.ErrNotFound):
		problem.Error(w, r, http.StatusNotFound, "not found")
	default:
		log.Error("request failed", "path", r.URL.Path, "err", err)
		problem.Unexpected(w, r, err)
	}
}

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

func handlePutContact(store Store, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		citizenID := chi.URLParam(r, "citizenId")
		if !mayActFor(claims, citizenID) {
			// 404, not 403: whether another citizen exists is not the caller's business.
			problem.Error(w, r, http.StatusNotFound, "not found")
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			problem.Error(w, r, http.StatusUnsupportedMediaType, "the body must be application/json")
			return
		}
		var b contactBody
		dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			problem.Error(w, r, http.StatusBadRequest, fmt.Sprintf("body is not a contact: %v", err))
			return
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			problem.Error(w, r, http.StatusBadRequest, "body is not a contact: data after the JSON object")
			return
		}
		c := notify.Contact{CitizenID: citizenID, Email: b.Email, Phone: b.Phone, Preferred: notify.Channel(b.PreferredChannel),
			ProgressNotices: b.ProgressNotices, QuietHours: b.QuietHours}
		if err := c.Validate(); err != nil {
			fail(w, r, log, err)
			return
		}
		out, err := store.PutContact(r.Context(), claims.TenantID, c, claims.Subject)
		if err != nil {
			fail(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, out)
	}
}

func handleGetContact(store Store, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		citizenID := chi.URLParam(r, "citizenId")
		if !mayActFor(claims, citizenID) {
			problem.Error(w, r, http.StatusNotFound, "not found")
			return
		}
		c, err := store.Contact(r.Context(), claims.TenantID, citizenID)
		if err != nil {
			fail(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, c)
	}
}

func handleListNotifications(store Store, log *slog.Logger) http.HandlerFunc {
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
		items, err := store.Notifications(r.Context(), claims.TenantID, requestID, citizenID)
		if err != nil {
			fail(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]any{"items": items})
	}
}
