package retryable_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agora-platform/agora/pkg/fabric/internal/retryable"
)

func TestIs(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"backend terminated", &pgconn.PgError{Code: "57P01"}, true},
		{"connection exception class", fmt.Errorf("query: %w", &pgconn.PgError{Code: "08006"}), true},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"invalid text", &pgconn.PgError{Code: "22021"}, false},
		{"deadline waiting for the pool", fmt.Errorf("acquire: %w", context.DeadlineExceeded), true},
		{"a bug", errors.New("nil map"), false},
		{"cancelled by the client", context.Canceled, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := retryable.Is(c.err); got != c.want {
				t.Errorf("Is(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
