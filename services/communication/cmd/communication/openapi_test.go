package main

import (
	"os"
	"testing"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/services/communication/internal/httpapi"
)

func TestMain(m *testing.M) {
	// The crash tests run this binary as the service (crash_test.go).
	if os.Getenv(envChild) == "1" {
		os.Exit(runChild())
	}
	deploytest.Main(m)
}

// TestOpenAPIServed: the service serves its document merged with the
// host's routes at /openapi.json, and every operation of it is served.
func TestOpenAPIServed(t *testing.T) {
	s := newStack(t).start(t, nil)
	s.CheckOpenAPI(t, s.url, httpapi.OpenAPI)
}
