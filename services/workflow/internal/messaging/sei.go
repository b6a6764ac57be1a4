package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// SEI registers requests in SEI. Its errors carry the fabric's failure
// classes: fabric.Permanent when SEI refused the registration,
// fabric.ErrUnavailable when SEI could not be reached or answered that it
// is unavailable, fabric.Transient when one call failed.
type SEI interface {
	Register(ctx context.Context, tenantID, requestID, unit string) (seiNumber string, err error)
}

// SEIRecords keeps where each request's SEI registration stands.
type SEIRecords interface {
	SEIRegistration(ctx context.Context, tenantID, requestID string) (process.SEIRegistration, bool, error)
	// RecordSEI emits the integration failure, derived from cause, when
	// the registration becomes rejected.
	RecordSEI(ctx context.Context, tenantID, requestID, unit string, res process.SEIResult, cause envelope.Envelope) (process.SEIRegistration, error)
}

// RegisterInSEI handles queue workflow.sei-register: each
// integration.sei.register.v1 registers its request in SEI once.
//
// A request already registered is skipped (the command was redelivered or
// sent again). Otherwise SEI is called, with the request id as idempotency
// key, outside any database transaction (a slow SEI holds no connection or
// lock), and the result is recorded: registered with SEI's number; still
// pending with the error, returned as it is classified (SEI down: the
// consumer keeps the command and calls again, however long the outage,
// nothing dead-lettered; transient: the retry tiers try again, then the
// DLQ); or rejected with SEI's reason, and
// dead-lettered as SEI_REJECTED, so the operators' DLQ alerts and API show
// it: a refusal needs a person, and retrying cannot change SEI's answer.
//
// No inbox: the sei_registration row is what makes a second delivery
// harmless, and it is checked before every call. A crash between SEI's
// answer and the record leaves the message unacked; its redelivery calls
// SEI again with the same key and gets the same number.
func RegisterInSEI(records SEIRecords, sei SEI, log *slog.Logger) fabric.Handler {
	return func(ctx context.Context, env envelope.Envelope) error {
		if env.Type != process.TypeSEIRegister {
			return fabric.Invalid(fmt.Errorf("unexpected %s %s on workflow.sei-register", env.Type, env.ID))
		}
		tenantID, p, err := fabric.Decode[process.SEIRegister](ctx, env)
		if err != nil {
			return err
		}
		id, err := uuid.Parse(p.RequestID)
		if err != nil {
			return fabric.Invalid(fmt.Errorf("%s %s: requestId %q: %w", env.Type, env.ID, p.RequestID, err))
		}
		requestID := id.String()
		reg, found, err := records.SEIRegistration(ctx, tenantID, requestID)
		if err != nil {
			return fabric.Transient(fmt.Errorf("sei register %s: %w", requestID, err))
		}
		if found && reg.Status == process.SEIRegistered {
			log.DebugContext(ctx, "already registered in SEI", "tenant", tenantID, "request", requestID, "seiNumber", reg.Number)
			return nil
		}
		number, callErr := sei.Register(ctx, tenantID, requestID, p.Unit)
		res := process.SEIResult{Status: process.SEIRegistered, Number: number}
		if callErr != nil {
			res = process.SEIResult{Status: process.SEIPending, Error: message(callErr)}
			if fabric.ClassOf(callErr) == fabric.ClassPermanent {
				res.Status = process.SEIRejected
			}
		}
		if _, err := records.RecordSEI(ctx, tenantID, requestID, p.Unit, res, env); err != nil {
			// Not recorded: try again later, whatever SEI said. A number
			// SEI gave comes back for the same key; a refusal is repeated.
			return fabric.Transient(errors.Join(callErr, fmt.Errorf("sei register %s: %w", requestID, err)))
		}
		switch res.Status {
		case process.SEIRegistered:
			log.InfoContext(ctx, "registered in SEI", "tenant", tenantID, "request", requestID, "seiNumber", number)
		case process.SEIRejected:
			log.WarnContext(ctx, "SEI refused the registration", "tenant", tenantID, "request", requestID, "reason", res.Error)
		}
		return callErr
	}
}

// message is err's text without the failure class the fabric prefixes
// ("transient: …"): what an operator reads in the process view.
func message(err error) string {
	if fabric.ClassOf(err) != fabric.ClassUnknown {
		if inner := errors.Unwrap(err); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}
