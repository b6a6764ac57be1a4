package fabric

import (
	"errors"
	"fmt"
	"net/http"
)

// Class is how the consumer treats a handler error.
type Class string

// Failure classes (docs/architecture.md).
const (
	// ClassTransient errors are retried through the retry tiers, then
	// dead-lettered.
	ClassTransient Class = "transient"
	// ClassPermanent errors are business failures: no retry, DLQ.
	ClassPermanent Class = "permanent"
	// ClassInvalid marks a malformed message: DLQ at once.
	ClassInvalid Class = "invalid"
	// ClassUnknown is any unclassified error: a limited number of retries,
	// then DLQ.
	ClassUnknown Class = "unknown"
)

// classUnavailable is ErrUnavailable's class: an outage of something every
// message needs (the service's database, its object store). The message is
// fine, so the consumer keeps it, in order, and tries again after a pause,
// however long the outage lasts; it never spends a retry tier or reaches
// the DLQ for it (ConsumerOptions.OutageHold). Code outside the fabric
// marks an outage with ErrUnavailable and never needs the class by name;
// the consumer asks ClassOf(ErrUnavailable).
const classUnavailable Class = "unavailable"

type classified struct {
	class Class
	err   error
}

func (c *classified) Error() string { return fmt.Sprintf("%s: %v", c.class, c.err) }
func (c *classified) Unwrap() error { return c.err }

// Transient marks err as worth retrying later (a dependency is down).
func Transient(err error) error { return &classified{ClassTransient, err} }

// Permanent marks err as a business failure that retrying cannot fix.
func Permanent(err error) error { return &classified{ClassPermanent, err} }

// Invalid marks err as caused by a malformed message.
func Invalid(err error) error { return &classified{ClassInvalid, err} }

type reasoned struct {
	reason string
	err    error
}

func (r *reasoned) Error() string { return r.err.Error() }
func (r *reasoned) Unwrap() error { return r.err }

// WithReason attaches a dead-letter reason code to err (it keeps err's
// class), so a DLQ says more than the generic PERMANENT_FAILURE.
func WithReason(err error, reason string) error { return &reasoned{reason, err} }

// ReasonOf returns the reason attached with WithReason, or def.
func ReasonOf(err error, def string) string {
	var r *reasoned
	if errors.As(err, &r) {
		return r.reason
	}
	return def
}

// ClassOf returns the class of the outermost marking err carries: a
// class it was marked with (Transient, Permanent, Invalid) or a kind it
// wraps (ErrInvalid, ErrNotFound, ErrConflict, ErrUnavailable), in the
// order errors.As walks the chain; else ClassUnknown. The outermost wins
// because it is the latest word: a handler that wraps a library's
// transient error in ErrUnavailable means an outage, not a retry tier.
func ClassOf(err error) Class {
	if c, ok := classOf(err); ok {
		return c
	}
	return ClassUnknown
}

func classOf(err error) (Class, bool) {
	switch e := err.(type) {
	case nil:
		return "", false
	case *classified:
		return e.class, true
	case *kind:
		return e.class, true
	case interface{ Unwrap() error }:
		return classOf(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if c, ok := classOf(inner); ok {
				return c, true
			}
		}
	}
	return "", false
}

// The kinds of failure every service answers alike. A service's own errors
// wrap one (fmt.Errorf("%w: no such task", fabric.ErrNotFound)) instead of
// being mapped by hand in each handler and consumer: the HTTP edge answers
// a kind with its status (problem.Fail), and the consumer treats it with
// its class (ClassOf) unless the error was marked with a class of its own.
// Both live in this one table, so the two can never disagree.
var (
	// ErrInvalid: the input reads, but breaks a rule (an address that is
	// not one, an outcome the task does not have). HTTP 422; a message is
	// ClassInvalid, dead-lettered at once.
	ErrInvalid error = &kind{"invalid", http.StatusUnprocessableEntity, ClassInvalid}
	// ErrNotFound: no such thing in the caller's tenant (another tenant's
	// answers the same, so that its existence does not leak). HTTP 404; a
	// message about it is ClassPermanent: retrying does not make it exist.
	ErrNotFound error = &kind{"not found", http.StatusNotFound, ClassPermanent}
	// ErrConflict: the thing's state does not allow it (already decided,
	// already exists, held by someone else). HTTP 409; ClassPermanent.
	ErrConflict error = &kind{"conflict", http.StatusConflict, ClassPermanent}
	// ErrUnavailable: a dependency every request or message needs is down
	// (the database, the object store), not the input. HTTP 503; a message
	// is kept and tried again until it is back, outside the retry tiers.
	ErrUnavailable error = &kind{"unavailable", http.StatusServiceUnavailable, classUnavailable}
)

// kind is one of the kinds above.
type kind struct {
	msg    string
	status int
	class  Class
}

func (k *kind) Error() string { return k.msg }

// HTTPStatus is the status problem.Fail answers an error of this kind
// with; problem asks for it by this method, so that it need not import
// the fabric.
func (k *kind) HTTPStatus() int { return k.status }
