package messaging

import (
	"context"
	"errors"
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
	"github.com/agora-platform/agora/services/analytics/internal/export"
)

// exportRunner carries out one export job; *export.Runner is one.
type exportRunner interface {
	Run(ctx context.Context, tenantID string, payload []byte) error
}

// exportJobs returns the handler of the report.export.v1 queue. It holds
// no transaction of its own (an export takes long, and records its
// progress as it goes): the export's status makes a redelivery harmless.
// A malformed job or one for an export the tenant does not have is
// invalid and dead-lettered at once; anything else failing is a
// dependency (database, object storage) and goes through the retry tiers.
func exportJobs(r exportRunner) fabric.Handler {
	return func(ctx context.Context, env envelope.Envelope) error {
		tenantID, err := tenant.From(ctx)
		if err != nil {
			return fabric.Invalid(fmt.Errorf("job %s: %w", env.ID, err))
		}
		if env.Type != export.JobType {
			return fabric.Invalid(fmt.Errorf("job %s: type %s is not %s", env.ID, env.Type, export.JobType))
		}
		err = r.Run(ctx, tenantID, env.Payload)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, export.ErrInvalid), errors.Is(err, export.ErrNotFound):
			return fabric.Invalid(fmt.Errorf("job %s: %w", env.ID, err))
		}
		return fabric.Transient(fmt.Errorf("job %s: %w", env.ID, err))
	}
}
