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
