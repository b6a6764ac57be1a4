package e2e

import (
	"os"
	"testing"

	"github.com/agora-platform/agora/e2e/harness"
)

// TestMain removes the service binaries the harness built, after all tests.
// With E2E_INFRA=containers it first starts RabbitMQ, PostgreSQL with
// pgvector and MinIO as containers for the tests and removes them at the
// end (harness.Main, package testinfra).
func TestMain(m *testing.M) { harness.Main(m, os.Getenv) }
