// Package survey publishes the satisfaction surveys citizens answer.
package survey

import (
	"context"
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Type is the event this package publishes.
const Type = "survey.answered.v1"

// Answer is the payload of survey.answered.v1.
type Answer struct {
	RequestID string `json:"requestId"`
	Score     int    `json:"score"`
}

// Publish sends a citizen's answer for tenantID and waits for the broker's
// confirm. The publisher checks it against the catalog's schema first.
func Publish(ctx context.Context, pub *broker.Publisher, tenantID string, a Answer) error {
	e, err := envelope.New(Type, tenantID, "request", a)
	if err != nil {
		return fmt.Errorf("survey: %w", err)
	}
	if err := pub.Publish(ctx, e); err != nil {
		return fmt.Errorf("survey: %w", err)
	}
	return nil
}
