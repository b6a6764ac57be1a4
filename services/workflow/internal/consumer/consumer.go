// Package consumer holds the workflow service's message handlers.
package consumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// Starter starts a process inside the inbox transaction.
type Starter interface {
	StartProcess(ctx context.Context, tx pgx.Tx, tenant string, sub process.Submitted, cause envelope.Envelope) error
}

// RequestSubmitted handles queue workflow.request-submitted: each
// request.submitted.v1 starts one process instance.
func RequestSubmitted(s Starter) inbox.TxHandler {
	return func(ctx context.Context, tx pgx.Tx, env envelope.Envelope) error {
		tenantID, err := tenant.From(ctx)
		if err != nil {
			return fabric.Invalid(err)
		}
		if env.Type != process.TypeRequestSubmitted {
			return fabric.Invalid(fmt.Errorf("unexpected %s %s on workflow.request-submitted", env.Type, env.ID))
		}
		var sub process.Submitted
		if err := json.Unmarshal(env.Payload, &sub); err != nil {
			return fabric.Invalid(fmt.Errorf("decode %s %s: %w", env.Type, env.ID, err))
		}
		if _, err := uuid.Parse(sub.RequestID); err != nil {
			return fabric.Invalid(fmt.Errorf("%s %s: requestId %q: %w", env.Type, env.ID, sub.RequestID, err))
		}
		return s.StartProcess(ctx, tx, tenantID, sub, env)
	}
}
