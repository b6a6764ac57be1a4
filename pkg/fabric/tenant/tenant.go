// Package tenant carries the tenant a piece of work belongs to in its
// context. The fabric's consumer sets it from the envelope (checked against
// the x-tenant-id header) before a handler runs; handlers read it here and
// never from payloads. Tx and Set scope a Postgres transaction to a tenant
// for the row-level security policies of every tenant table.
package tenant

import (
	"context"
	"errors"
)

type key struct{}

// ErrMissing is returned by From when the context carries no tenant.
var ErrMissing = errors.New("no tenant in context")

// With returns ctx carrying tenant id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the tenant in ctx, or ErrMissing.
func From(ctx context.Context) (string, error) {
	id, ok := ctx.Value(key{}).(string)
	if !ok || id == "" {
		return "", ErrMissing
	}
	return id, nil
}
