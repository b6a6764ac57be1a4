package main

import (
	"testing"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/services/workflow/internal/httpapi"
)

// TestMain: the crash tests run this binary as the service too
// (deploytest.Spawn, runChild in crash_test.go).
func TestMain(m *testing.M) { deploytest.Main(m, runChild) }

// TestOpenAPIServed: the service serves its document merged with the
// host's routes at /openapi.json, and every operation of it is served.
func TestOpenAPIServed(t *testing.T) {
	p := newPlatform(t)
	p.CheckOpenAPI(t, p.start(t, nil), httpapi.OpenAPI)
}
