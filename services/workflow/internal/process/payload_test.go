package process

import (
	"encoding/json"
	"testing"

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
	tests := []struct {
		typ     string
		full    any
		minimal any
	}{
		{TypeStart, Start{RequestID: id, ServiceID: "building-permit", CitizenID: "citizen-7"}, Start{RequestID: id, ServiceID: "x"}},
		{TypeSEIRegister, SEIRegister{RequestID: id, Unit: "SEMURB"}, SEIRegister{RequestID: id}},
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
