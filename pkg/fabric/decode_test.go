package fabric_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

func TestDecode(t *testing.T) {
	type doc struct {
		DocumentID string `json:"documentId"`
	}
	_, errMissing := tenant.From(context.Background()) // the error for no tenant
	tests := []struct {
		name       string
		ctx        context.Context
		payload    string
		wantTenant string
		wantDoc    doc
		wantClass  fabric.Class
		wantErr    error
	}{
		{"tenant and payload", tenant.With(context.Background(), "org-a"), `{"documentId":"d-1"}`, "org-a", doc{"d-1"}, "", nil},
		{"no tenant", context.Background(), `{"documentId":"d-1"}`, "", doc{}, fabric.ClassInvalid, errMissing},
		{"payload of another shape", tenant.With(context.Background(), "org-a"), `{"documentId":7}`, "", doc{}, fabric.ClassInvalid, nil},
		{"not JSON", tenant.With(context.Background(), "org-a"), `{`, "", doc{}, fabric.ClassInvalid, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := envelope.Envelope{ID: "e-1", Type: "document.uploaded.v1", Payload: []byte(tt.payload)}
			tenantID, got, err := fabric.Decode[doc](tt.ctx, env)
			if tt.wantClass == "" {
				if err != nil || tenantID != tt.wantTenant || got != tt.wantDoc {
					t.Fatalf("Decode = %q, %+v, %v; want %q, %+v", tenantID, got, err, tt.wantTenant, tt.wantDoc)
				}
				return
			}
			if err == nil || fabric.ClassOf(err) != tt.wantClass {
				t.Fatalf("Decode error = %v (class %s), want class %s", err, fabric.ClassOf(err), tt.wantClass)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Decode error = %v, want it to wrap %v", err, tt.wantErr)
			}
			if tenantID != "" {
				t.Errorf("Decode returned tenant %q with an error", tenantID)
			}
		})
	}
}
