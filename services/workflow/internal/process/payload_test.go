package process

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/registry"
)

// TestPayloadsMatchTheirSchemas checks the payload types this package
// keeps for commands the catalog's payload package has no type for yet,
// as that package's own test does for its types: every field filled is
// accepted by the closed schema, and the zero value of every optional
// field is left out rather than sent.
func TestPayloadsMatchTheirSchemas(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	const id = "0193a5c2-7e1f-7b3a-9c4d-1e2f3a4b5c6d"
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		typ     string
		full    any
		minimal any
	}{
		{TypeStart, Start{RequestID: id, ServiceID: "building-permit", CitizenID: "citizen-7"}, Start{RequestID: id, ServiceID: "x"}},
		{TypeSEIRegister, SEIRegister{RequestID: id, Unit: "SEMURB"}, SEIRegister{RequestID: id}},
		{TypeReviewOverdue, ReviewOverdue{ReviewID: id, DecisionID: id, Kind: "approval", Role: "operator", SubscriptionID: id,
			SubscriptionVersion: 2, EventID: id, EventType: TypeStuck, CreatedAt: at, DueAt: at},
			ReviewOverdue{ReviewID: id, DecisionID: id, Kind: "review", Role: "attendant", SubscriptionID: id, EventID: id,
				EventType: TypeStuck, CreatedAt: at, DueAt: at}},
		{TypeIntegrationFailed, IntegrationFailed{Integration: "sei", Operation: "register", RequestID: id, Unit: "SEMURB",
			Failure: "rejected", Reason: "closed unit", Attempts: 1},
			IntegrationFailed{Integration: "sei", Operation: "register", RequestID: id, Failure: "rejected", Attempts: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.typ, func(t *testing.T) {
			for _, p := range []any{tc.full, tc.minimal} {
				data, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := reg.ValidatePayload(tc.typ, data); err != nil {
					t.Errorf("%s is refused by the schema: %v", data, err)
				}
			}
		})
	}
}
