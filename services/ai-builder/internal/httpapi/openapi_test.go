package httpapi_test

import (
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
	"github.com/agora-platform/agora/services/ai-builder/internal/httpapi"
)

// TestOpenAPIDocument: the service's document, merged with the host's
// routes, is a valid OpenAPI 3.1 document, and it documents exactly the
// routes the router serves.
func TestOpenAPIDocument(t *testing.T) {
	var served []openapi.Operation
	if err := chi.Walk(httpapi.NewHandler(httpapi.Deps{Auth: auth.NewVerifier(nil, "")}).(chi.Routes), openapitest.Collect(&served)); err != nil {
		t.Fatal(err)
	}
	if err := openapitest.CheckRoutes(httpapi.OpenAPI, openapi.Host{Queues: []string{"ai.knowledge-builder"}}, served); err != nil {
		t.Error(err)
	}
}
