package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
	"github.com/agora-platform/agora/services/document-worker/internal/messaging"
	"github.com/agora-platform/agora/services/document-worker/internal/postgres/pgdb"
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
		if got := fabric.ClassOf(messaging.Classify(wrapped)); got != c.want {
			t.Errorf("Classify(%v) class = %s, want %s", wrapped, got, c.want)
		}
	}
}

type fakeProcessor struct{ res document.Result }

func (f fakeProcessor) Process(_ context.Context, tenantID string, u document.Uploaded) (document.Result, error) {
	r := f.res
	r.Uploaded, r.TenantID = u, tenantID
	return r, nil
}

type fakeRecorder struct{}

func (fakeRecorder) SaveResult(context.Context, pgdb.DBTX, document.Result, string) error { return nil }
func (fakeRecorder) Source(context.Context, pgdb.DBTX, string, string) (document.Uploaded, error) {
	return document.Uploaded{}, document.ErrUnknownDocument
}

// checkedOutbox keeps what is enqueued after checking it against the
// catalog, as the real outbox does.
type checkedOutbox struct {
	reg   *registry.Registry
	items []outbox.Item
}

func (o *checkedOutbox) Enqueue(_ context.Context, _ outbox.Tx, items ...outbox.Item) error {
	for _, it := range items {
		if _, err := o.reg.Check(it.Envelope); err != nil {
			return err
		}
	}
	o.items = append(o.items, items...)
	return nil
}

// record enqueues the verdict after document.processed.v1, on the
// document's aggregate, derived from the upload like the other two.
func TestUploadedEnqueuesTheVerdict(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	docID, reqID := uuid.NewString(), uuid.NewString()
	upload, err := envelope.New("document.uploaded.v1", "org-a", "request-service", payload.DocumentUploaded{
		DocumentID: docID, RequestID: reqID, Bucket: "documents", ObjectKey: "tenant=org-a/x.txt", FileName: "x.txt",
		ContentType: "text/plain", Size: 2, SHA256: strings.Repeat("ab", 32)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		verdict document.Verdict
		want    payload.DocumentValidated
	}{
		{"readable identity", document.Validate("CARTEIRA DE IDENTIDADE  RG 12.345.678-9  Nome: Maria da Silva", 1),
			payload.DocumentValidated{Valid: true, Kind: enum.Of(payload.DocumentKind("identity"))}},
		{"unreadable", document.Validate("~ .. 1", 1),
			payload.DocumentValidated{Valid: false, Kind: enum.Of(payload.DocumentKind("unknown"))}},
		{"no verdict is unknown", document.Verdict{Valid: true, Checks: []document.Check{}},
			payload.DocumentValidated{Valid: true, Kind: enum.Of(payload.DocumentKind("unknown"))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := &checkedOutbox{reg: reg}
			h := messaging.NewHandler(fakeProcessor{document.Result{TextObjectKey: "tenant=org-a/documents/" + docID + "/text.txt",
				Pages: 1, Characters: 10, Method: document.MethodPlain, Verdict: c.verdict}}, fakeRecorder{}, out, slog.New(slog.DiscardHandler))
			if err := h.Uploaded(tenant.With(context.Background(), "org-a"), nil, upload); err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, it := range out.items {
				types = append(types, it.Envelope.Type)
				if it.Envelope.CausationID != upload.ID || it.Envelope.CorrelationID != upload.CorrelationID || it.Envelope.TenantID != "org-a" {
					t.Errorf("%s: causation %s correlation %s tenant %s, want the upload's", it.Envelope.Type,
						it.Envelope.CausationID, it.Envelope.CorrelationID, it.Envelope.TenantID)
				}
			}
			if want := []string{"document.processed.v1", "document.validated.v1", "ai.knowledge.index.v1"}; !slices.Equal(types, want) {
				t.Fatalf("enqueued %v, want %v", types, want)
			}
			if out.items[0].Aggregate != out.items[1].Aggregate || out.items[1].Aggregate != (outbox.Aggregate{Type: "document", ID: docID}) {
				t.Errorf("aggregates %v and %v, want both the document's (so processed goes first)", out.items[0].Aggregate, out.items[1].Aggregate)
			}
			var got payload.DocumentValidated
			if err := json.Unmarshal(out.items[1].Envelope.Payload, &got); err != nil {
				t.Fatal(err)
			}
			if got.DocumentID != docID || got.RequestID != reqID || got.Valid != c.want.Valid || got.Kind.Raw() != c.want.Kind.Raw() {
				t.Errorf("validated = %+v, want document %s request %s valid %v kind %s", got, docID, reqID, c.want.Valid, c.want.Kind.Raw())
			}
			if len(got.Checks) != len(c.verdict.Checks) || (got.Valid == (got.Reason != "")) {
				t.Errorf("validated checks %+v reason %q, want the verdict's %d checks and a reason only when invalid", got.Checks, got.Reason, len(c.verdict.Checks))
			}
		})
	}
}
