// Package execution carries, in a context, what the fabric knows of the
// work the context belongs to: the message a consumer hands a handler (or
// none, for a host's background worker), the service and the release it
// runs. The consumer, the host and replay's simulation put it there;
// fabric.ExecutionOf reads it. It is a package of its own so that those
// three can write what package fabric reads without package fabric
// exporting a setter: handlers read their execution, they never forge one.
package execution

import (
	"context"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Run is one execution's inputs. fabric.ExecutionOf derives everything a
// handler asks about from them, in one place.
type Run struct {
	// Env is the message being handled; nil outside a handler (a sweep).
	Env *envelope.Envelope
	// Service is the service doing the work (host.Config.Service); empty
	// when the consumer runs without a host.
	Service string
	// Release is the release id the service runs (RELEASE_ID).
	Release string
}

type key struct{}

// With returns ctx carrying r.
func With(ctx context.Context, r Run) context.Context {
	return context.WithValue(ctx, key{}, r)
}

// From returns the Run With put in ctx.
func From(ctx context.Context) (Run, bool) {
	r, ok := ctx.Value(key{}).(Run)
	return r, ok
}
