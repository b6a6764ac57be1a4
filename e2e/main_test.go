package e2e

import (
	"testing"

	"github.com/agora-platform/agora/e2e/harness"
)

// TestMain removes the service binaries the harness built, after all tests.
func TestMain(m *testing.M) { harness.Main(m) }
