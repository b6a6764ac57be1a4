package fabric_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric"
)

func ExampleTransient() {
	err := fabric.Transient(fmt.Errorf("smtp: %w", errors.New("connection refused")))
	fmt.Println(fabric.ClassOf(err), fabric.ClassOf(errors.New("x")))
	// Output: transient unknown
}

func TestClassOfKinds(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want fabric.Class
	}{
		{"not found", fmt.Errorf("task t-1: %w", fmt.Errorf("%w: no such task", fabric.ErrNotFound)), fabric.ClassPermanent},
		{"conflict", fmt.Errorf("%w: already decided", fabric.ErrConflict), fabric.ClassPermanent},
		{"invalid", fmt.Errorf("%w: email is not an address", fabric.ErrInvalid), fabric.ClassInvalid},
		{"marked class wins over kind", fabric.Transient(fmt.Errorf("%w: not yet", fabric.ErrNotFound)), fabric.ClassTransient},
		{"unavailable", fmt.Errorf("%w: the object store refuses connections", fabric.ErrUnavailable), fabric.Class("unavailable")},
		{"the outermost marking wins", fmt.Errorf("%w: ingest: %w", fabric.ErrUnavailable, fabric.Transient(errors.New("connection reset"))), fabric.Class("unavailable")},
		{"outermost in a joined error", errors.Join(errors.New("x"), fabric.Permanent(errors.New("y")), fabric.ErrConflict), fabric.ClassPermanent},
		{"no kind", errors.New("x"), fabric.ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fabric.ClassOf(tt.err); got != tt.want {
				t.Errorf("ClassOf(%v) = %s, want %s", tt.err, got, tt.want)
			}
		})
	}
}
