package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/analytics/internal/export"
	"github.com/agora-platform/agora/services/analytics/internal/projection"
)

// ExportsPath is where exports are asked for; an export lives under it.
const ExportsPath = "/v1/reports/exports"

// Exports stores exports (and enqueues their jobs).
type Exports interface {
	Create(ctx context.Context, e export.Export) (export.Export, error)
	Get(ctx context.Context, tenantID, id string) (export.Export, error)
}

// Links signs download links of export files.
type Links interface {
	URL(ctx context.Context, key, filename string, ttl time.Duration) (*url.URL, error)
}

// ExportDeps are what the export routes need.
type ExportDeps struct {
	Exports Exports
	Links   Links
	LinkTTL time.Duration // how long a download link works
}

// maxExportBody bounds a request body: three short strings.
const maxExportBody = 4 << 10

// exportRequest is the body of POST /v1/reports/exports.
type exportRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Format string `json:"format"`
}

// exportView is an export as the API shows it.
type exportView struct {
	ID          string        `json:"id"`
	Status      export.Status `json:"status"`
	From        string        `json:"from"`
	To          string        `json:"to"`
	Format      export.Format `json:"format"`
	RequestedBy string        `json:"requestedBy"`
	// RowsTotal is absent until a worker has counted the rows.
	RowsTotal   *int64     `json:"rowsTotal,omitempty"`
	RowsWritten int64      `json:"rowsWritten"`
	Error       string     `json:"error,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	// URL downloads the file (status done) until URLExpiresAt.
	URL          string     `json:"url,omitempty"`
	URLExpiresAt *time.Time `json:"urlExpiresAt,omitempty"`
}

func view(e export.Export) exportView {
	return exportView{ID: e.ID, Status: e.Status, From: e.Range.From.Format(projection.DateLayout),
		To: e.Range.To.Format(projection.DateLayout), Format: e.Format, RequestedBy: e.RequestedBy,
		RowsTotal: e.RowsTotal, RowsWritten: e.RowsWritten, Error: e.Error, CreatedAt: e.CreatedAt,
		UpdatedAt: e.UpdatedAt, StartedAt: e.StartedAt, FinishedAt: e.FinishedAt}
}

// handleCreateExport serves POST /v1/reports/exports: it validates the
// body, stores the export and enqueues its job in one transaction, and
// answers 202 with the export and its Location.
func handleCreateExport(d ExportDeps, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		var body exportRequest
		if status, msg := decodeBody(w, r, &body); status != 0 {
			problem.Error(w, r, status, msg)
			return
		}
		e, err := export.New(claims.TenantID, claims.Subject, body.From, body.To, body.Format)
		if errors.Is(err, export.ErrInvalid) {
			problem.Error(w, r, http.StatusBadRequest, err.Error())
			return
		}
		if err == nil {
			e, err = d.Exports.Create(r.Context(), e)
		}
		if err != nil {
			log.ErrorContext(r.Context(), "create export", "err", err, "tenant", claims.TenantID)
			problem.Unexpected(w, r, err)
			return
		}
		w.Header().Set("Location", ExportsPath+"/"+e.ID)
		httpjson.Write(w, http.StatusAccepted, view(e))
	}
}

// handleGetExport serves GET /v1/reports/exports/{id}: the export of the
// token's tenant (404 for any other), with a download link once done.
func handleGetExport(d ExportDeps, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		e, err := d.Exports.Get(r.Context(), claims.TenantID, chi.URLParam(r, "id"))
		if errors.Is(err, export.ErrNotFound) {
			problem.Error(w, r, http.StatusNotFound, "no such export")
			return
		}
		if err != nil {
			log.ErrorContext(r.Context(), "get export", "err", err, "tenant", claims.TenantID)
			problem.Unexpected(w, r, err)
			return
		}
		v := view(e)
		if e.Status == export.StatusDone {
			expires := time.Now().Add(d.LinkTTL).UTC().Truncate(time.Second)
			u, err := d.Links.URL(r.Context(), e.ObjectKey, e.FileName(), d.LinkTTL)
			if err != nil {
				// Signing asks the store for the bucket's region once: a
				// store that is down makes this a retryable 503.
				log.WarnContext(r.Context(), "sign export link", "err", err, "export", e.ID)
				w.Header().Set("Retry-After", "1")
				problem.Error(w, r, http.StatusServiceUnavailable, "the download link cannot be made now; retry")
				return
			}
			v.URL, v.URLExpiresAt = u.String(), &expires
		}
		httpjson.Write(w, http.StatusOK, v)
	}
}

// decodeBody reads one JSON object strictly (application/json, no unknown
// fields, nothing after it) into v. It returns 0 when it could, else the
// status and detail of the problem to answer.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, string) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "the body must be application/json"
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxExportBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, "the body is too large"
		}
		return http.StatusBadRequest, "unreadable body"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, "malformed JSON body: " + err.Error()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return http.StatusBadRequest, "malformed JSON body: data after the object"
	}
	return 0, ""
}
