package fabric_test

import (
	"errors"
	"fmt"

	"github.com/agora-platform/agora/pkg/fabric"
)

func ExampleTransient() {
	err := fabric.Transient(fmt.Errorf("smtp: %w", errors.New("connection refused")))
	fmt.Println(fabric.ClassOf(err), fabric.ClassOf(errors.New("x")))
	// Output: transient unknown
}
