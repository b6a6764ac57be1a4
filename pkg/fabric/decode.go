package fabric

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

// Decode reads what every handler starts with: the tenant the consumer put
// in ctx from the envelope, and the payload as a P (a type of package
// catalog/payload). Either failing means the message itself is malformed,
// which no retry can fix, so the error is Invalid and names the message.
func Decode[P any](ctx context.Context, env envelope.Envelope) (tenantID string, p P, err error) {
	if tenantID, err = tenant.From(ctx); err != nil {
		return "", p, Invalid(fmt.Errorf("%s %s: %w", env.Type, env.ID, err))
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return "", p, Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
	}
	return tenantID, p, nil
}
