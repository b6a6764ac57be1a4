package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/agora-platform/agora/pkg/fabric/openapi"
	"github.com/agora-platform/agora/pkg/fabric/openapi/openapitest"
	"github.com/agora-platform/agora/services/workflow/internal/httpapi"
	"github.com/agora-platform/agora/services/workflow/internal/process"
)

// noProcesses lets the router be built; its routes are walked, not called.
type noProcesses struct{}

func (noProcesses) Processes(context.Context, process.Actor, string) ([]process.Instance, error) {
	return nil, nil
}

func (noProcesses) CompleteTask(context.Context, process.Actor, string, process.Decision) (process.Instance, error) {
	return process.Instance{}, nil
}

func (noProcesses) Worklist(context.Context, process.Actor, process.TaskQuery) ([]process.WorkItem, error) {
	return nil, nil
}

func (noProcesses) ClaimTask(context.Context, process.Actor, string) (process.Task, error) {
	return process.Task{}, nil
}

func (noProcesses) ReleaseTask(context.Context, process.Actor, string) (process.Task, error) {
	return process.Task{}, nil
}

// TestOpenAPIDocument: the service's document, merged with the host's
// routes, is a valid OpenAPI 3.1 document, and it documents exactly the
// routes the router serves.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := openapi.Document(httpapi.OpenAPI, openapi.Host{Queues: []string{"workflow.request-submitted"}})
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
	if err := chi.Walk(httpapi.NewHandler(httpapi.Deps{Processes: noProcesses{}}).(chi.Routes), walk); err != nil {
		t.Fatal(err)
	}
	if err := openapitest.CompareRoutes(served, documented); err != nil {
		t.Error(err)
	}
}
