package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

func TestCheckReasonIsTypedNotTextual(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	valid := func(t *testing.T, typ, tenantID string, payload map[string]any) envelope.Envelope {
		t.Helper()
		e, err := envelope.New(typ, tenantID, "test", payload)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	submitted := map[string]any{
		"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001",
		"serviceId": "s", "formId": "f1", "formVersion": 1, "channel": "web",
		"citizenId": "c-1", "submittedAt": "2026-11-30T10:00:00Z",
	}
	check := func(e envelope.Envelope) error {
		_, err := reg.CheckIncoming(e)
		if err == nil {
			t.Fatalf("CheckIncoming(%+v) = nil, want an error", e)
		}
		return err
	}
	noTenant := valid(t, "request.submitted.v1", "org-a", submitted)
	noTenant.TenantID = ""
	badTenant := valid(t, "request.submitted.v1", "org-a", submitted)
	badTenant.TenantID = "Org A"
	noProducer := valid(t, "request.submitted.v1", "org-a", submitted)
	noProducer.Producer = ""
	unknown := valid(t, "request.submitted.v1", "org-a", submitted)
	unknown.Type = "request.exploded.v1"
	schema := valid(t, "request.submitted.v1", "org-a", submitted)
	schema.Payload = []byte(`{"requestId":1}`)
	missingTenant := check(noTenant)

	tests := []struct {
		name string
		err  error
		want string
	}{
		{"tenant missing", missingTenant, wire.ReasonTenantMissing},
		{"tenant missing, wrapped", fmt.Errorf("consumer q: %w", missingTenant), wire.ReasonTenantMissing},
		{"tenant not a tenant id", check(badTenant), wire.ReasonInvalidEnvelope},
		{"producer missing", check(noProducer), wire.ReasonInvalidEnvelope},
		{"unknown type", check(unknown), wire.ReasonUnknownType},
		{"schema", check(schema), wire.ReasonSchema},
		{"another missing field that mentions tenantId", fmt.Errorf("%w: producer (tenantId was present)", envelope.ErrMissingField), wire.ReasonInvalidEnvelope},
		{"plain text about tenantId", errors.New("missing required field: tenantId"), wire.ReasonInvalidEnvelope},
	}
	for _, tc := range tests {
		if got := checkReason(tc.err); got != tc.want {
			t.Errorf("%s: checkReason(%q) = %s, want %s", tc.name, tc.err, got, tc.want)
		}
	}
}
