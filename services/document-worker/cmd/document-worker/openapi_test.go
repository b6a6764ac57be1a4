package main

import (
	"context"
	"os"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
	"github.com/agora-platform/agora/services/document-worker/internal/httpapi"
)

// api checks every exchange this package's tests have with the services
// they start (stack.start registers each) against the OpenAPI document the
// service serves: an answer the document does not describe fails the call
// that got it, and the test binary.
var api = openapitest.NewTransport(nil)

func TestMain(m *testing.M) { os.Exit(api.Run(m)) }

// checkAPI has api check the exchanges with the service at url.
func checkAPI(t testing.TB, url string) {
	t.Helper()
	if err := api.AddService(context.Background(), url); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAPIServed: the service serves its document merged with the
// host's routes at /openapi.json, and every operation of it is served.
func TestOpenAPIServed(t *testing.T) {
	s := newStack(t)
	s.CheckOpenAPI(t, s.start(nil).URL, httpapi.OpenAPI)
}
