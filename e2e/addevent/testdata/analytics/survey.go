// Package survey takes in the satisfaction surveys citizens answer.
package survey

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

// Answer is the part of survey.answered.v1 analytics reads; a tolerant
// reader, it ignores fields added later.
type Answer struct {
	RequestID string `json:"requestId"`
	Score     int    `json:"score"`
}

// Handler hands each answer to record, with the tenant the fabric
// verified. An answer it cannot read is invalid: the fabric dead-letters
// it with the reason instead of retrying.
func Handler(record func(ctx context.Context, tenantID string, a Answer) error) fabric.Handler {
	return func(ctx context.Context, e envelope.Envelope) error {
		tenantID, err := tenant.From(ctx)
		if err != nil {
			return fabric.Invalid(fmt.Errorf("survey %s: %w", e.ID, err))
		}
		var a Answer
		if err := json.Unmarshal(e.Payload, &a); err != nil {
			return fabric.Invalid(fmt.Errorf("survey %s: %w", e.ID, err))
		}
		return record(ctx, tenantID, a)
	}
}
