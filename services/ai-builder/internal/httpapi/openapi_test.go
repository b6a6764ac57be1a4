package httpapi_test

import (
	"net/http"
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
	doc, err := openapi.Document(httpapi.OpenAPI, openapi.Host{Queues: []string{"ai.knowledge-builder"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openapitest.New(doc); err != nil {
		t.Fatal(err)
	}
	documented, err := openapi.Operations(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var served []openapi.Operation
	walk := func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, openapi.Operation{Method: method, Path: route})
		return nil
	}
	router := httpapi.NewHandler(auth.NewVerifier(nil, "").Require, nil, nil).(chi.Routes)
	if err := chi.Walk(router, walk); err != nil {
		t.Fatal(err)
	}
	if err := openapitest.CompareRoutes(served, documented); err != nil {
		t.Error(err)
	}
}
