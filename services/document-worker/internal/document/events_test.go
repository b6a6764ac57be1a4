package document_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

// A processed document's three envelopes are derived from the upload,
// valid by the catalog, and the verdict says what the validator found.
func TestEventsOfAProcessedDocument(t *testing.T) {
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
		valid   bool
		kind    string
	}{
		{"readable identity", document.Validate("CARTEIRA DE IDENTIDADE  RG 12.345.678-9  Nome: Maria da Silva", 1), true, "identity"},
		{"unreadable", document.Validate("~ .. 1", 1), false, "unknown"},
		{"no verdict is unknown", document.Verdict{Valid: true, Checks: []document.Check{}}, true, "unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := document.Result{Uploaded: document.Uploaded{DocumentID: docID, RequestID: reqID}, TenantID: "org-a",
				TextObjectKey: "tenant=org-a/documents/" + docID + "/text.txt", Pages: 1, Characters: 10, Method: document.MethodPlain,
				Verdict: c.verdict}
			var envs []envelope.Envelope
			for _, build := range []func(envelope.Envelope, document.Result) (envelope.Envelope, error){
				document.ProcessedEvent, document.ValidatedEvent, document.IndexCommand,
			} {
				e, err := build(upload, res)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := reg.Check(e); err != nil {
					t.Errorf("%s: %v", e.Type, err)
				}
				if e.CausationID != upload.ID || e.CorrelationID != upload.CorrelationID || e.TenantID != "org-a" || e.Producer != document.Producer {
					t.Errorf("%s: causation %s correlation %s tenant %s producer %s, want the upload's and %s", e.Type,
						e.CausationID, e.CorrelationID, e.TenantID, e.Producer, document.Producer)
				}
				envs = append(envs, e)
			}
			if got := []string{envs[0].Type, envs[1].Type, envs[2].Type}; got[0] != "document.processed.v1" ||
				got[1] != "document.validated.v1" || got[2] != "ai.knowledge.index.v1" {
				t.Fatalf("types %v", got)
			}
			var got payload.DocumentValidated
			if err := json.Unmarshal(envs[1].Payload, &got); err != nil {
				t.Fatal(err)
			}
			if got.DocumentID != docID || got.RequestID != reqID || got.Valid != c.valid || got.Kind.Raw() != c.kind {
				t.Errorf("validated = %+v, want document %s request %s valid %v kind %s", got, docID, reqID, c.valid, c.kind)
			}
			if len(got.Checks) != len(c.verdict.Checks) || (got.Valid == (got.Reason != "")) {
				t.Errorf("validated checks %+v reason %q, want the verdict's %d checks and a reason only when invalid", got.Checks, got.Reason, len(c.verdict.Checks))
			}
		})
	}
}
