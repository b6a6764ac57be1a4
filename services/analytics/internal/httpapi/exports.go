package httpapi

import (
	"context"
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
	CreateExport(ctx context.Context, e export.Export) (export.Export, error)
	GetExport(ctx context.Context, tenantID, id string) (export.Export, error)
}

// Links signs download links of export files.
type Links interface {
	URL(ctx context.Context, bucket, key, filename string, ttl time.Duration) (*url.URL, error)
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
func handleCreateExport(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		var body exportRequest
		if err := httpjson.ReadStrict(w, r, maxExportBody, &body); err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		e, err := export.New(claims.TenantID, claims.Subject, body.From, body.To, body.Format)
		if err == nil {
			e, err = d.Exports.CreateExport(r.Context(), e)
		}
		if err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		w.Header().Set("Location", ExportsPath+"/"+e.ID)
		httpjson.Write(w, http.StatusAccepted, view(e))
	}
}

// handleGetExport serves GET /v1/reports/exports/{id}: the export of the
// token's tenant (404 for any other), with a download link once done.
func handleGetExport(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		claims, _ := auth.FromContext(r.Context())
		e, err := d.Exports.GetExport(r.Context(), claims.TenantID, chi.URLParam(r, "id"))
		if err != nil {
			problem.Fail(w, r, d.Log, err)
			return
		}
		v := view(e)
		if e.Status == export.StatusDone {
			expires := time.Now().Add(d.LinkTTL).UTC().Truncate(time.Second)
			u, err := d.Links.URL(r.Context(), d.Bucket, e.ObjectKey, e.FileName(), d.LinkTTL)
			if err != nil {
				// Signing asks the store for the bucket's region once: a
				// store that is down makes this a retryable 503.
				d.Log.WarnContext(r.Context(), "sign export link", "err", err, "export", e.ID)
				w.Header().Set("Retry-After", "1")
				problem.Error(w, r, http.StatusServiceUnavailable, "the download link cannot be made now; retry")
				return
			}
			v.URL, v.URLExpiresAt = u.String(), &expires
		}
		httpjson.Write(w, http.StatusOK, v)
	}
}
