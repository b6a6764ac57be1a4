package httpapi_test

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
	"github.com/agora-platform/agora/services/document-worker/internal/httpapi"
)

// TestOpenAPIDocument: the service's document, merged with the host's
// routes, is a valid OpenAPI 3.1 document with no route of the service's
// own (the service has none).
func TestOpenAPIDocument(t *testing.T) {
	if err := openapitest.CheckRoutes(httpapi.OpenAPI, openapi.Host{Queues: []string{"document.processing", "document.process-commands"}}, nil); err != nil {
		t.Error(err)
	}
}
