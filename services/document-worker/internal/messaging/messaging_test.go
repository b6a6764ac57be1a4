package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want fabric.Class
	}{
		{document.ErrUnavailable, fabric.ClassTransient},
		{document.ErrCorrupt, fabric.ClassPermanent},
		{document.ErrUnsupported, fabric.ClassPermanent},
		{document.ErrForeignObject, fabric.ClassPermanent},
		{document.ErrChecksum, fabric.ClassPermanent},
		{document.ErrNotFound, fabric.ClassPermanent},
		{errors.New("something else"), fabric.ClassUnknown},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("document x: %w", c.err)
		if got := fabric.ClassOf(classify(wrapped)); got != c.want {
			t.Errorf("classify(%v) class = %s, want %s", wrapped, got, c.want)
		}
	}
}

type fakeProcessor struct{}

func (fakeProcessor) Process(_ context.Context, tenantID string, u document.Uploaded) (document.Result, error) {
	return document.Result{Uploaded: u, TenantID: tenantID, Method: document.MethodPlain}, nil
}

// fakeRecorder keeps what it is asked to record, and fails with err.
type fakeRecorder struct {
	results []document.Result
	causes  []envelope.Envelope
	err     error
}

func (f *fakeRecorder) Record(_ context.Context, _ pgx.Tx, r document.Result, cause envelope.Envelope) error {
	f.results, f.causes = append(f.results, r), append(f.causes, cause)
	return f.err
}

func (*fakeRecorder) Source(context.Context, pgx.Tx, string, string) (document.Uploaded, error) {
	return document.Uploaded{}, document.ErrUnknownDocument
}

// An upload is processed for the envelope's tenant and recorded with the
// upload as the cause of its events; a store that fails is retried.
func TestUploadedRecordsTheResult(t *testing.T) {
	docID := uuid.NewString()
	upload, err := envelope.New("document.uploaded.v1", "org-a", "request-service", payload.DocumentUploaded{
		DocumentID: docID, RequestID: uuid.NewString(), Bucket: "documents", ObjectKey: "tenant=org-a/x.txt", FileName: "x.txt",
		ContentType: "text/plain", Size: 2, SHA256: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenant.With(context.Background(), "org-a")
	rec := &fakeRecorder{}
	h := &handler{proc: fakeProcessor{}, rec: rec, log: slog.New(slog.DiscardHandler)}
	if err := h.uploaded(ctx, nil, upload); err != nil {
		t.Fatal(err)
	}
	if len(rec.results) != 1 || rec.results[0].TenantID != "org-a" || rec.results[0].DocumentID != docID || rec.causes[0].ID != upload.ID {
		t.Fatalf("recorded %+v caused by %v, want document %s of org-a caused by the upload %s", rec.results, rec.causes, docID, upload.ID)
	}
	rec.err = errors.New("database down")
	if err := h.uploaded(ctx, nil, upload); fabric.ClassOf(err) != fabric.ClassTransient {
		t.Errorf("a failing store gives %v (class %s), want a transient failure", err, fabric.ClassOf(err))
	}
}
