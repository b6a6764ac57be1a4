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
	doc, err := openapi.Document(httpapi.OpenAPI, openapi.Host{Queues: []string{"document.processing", "document.process-commands"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openapitest.New(doc); err != nil {
		t.Fatal(err)
	}
	if ops, err := openapi.Operations(httpapi.OpenAPI); err != nil || len(ops) != 0 {
		t.Errorf("the service's own operations = %v, %v; want none", ops, err)
	}
}
