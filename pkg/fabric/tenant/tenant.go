package tenant

import (
	"context"
	"errors"
)

type key struct{}

// errMissing is returned by From when the context carries no tenant.
var errMissing = errors.New("no tenant in context")

// With returns ctx carrying tenant id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// From returns the tenant in ctx, or an error when there is none.
func From(ctx context.Context) (string, error) {
	id, ok := ctx.Value(key{}).(string)
	if !ok || id == "" {
		return "", errMissing
	}
	return id, nil
}
