package httpapi_test

import (
	"context"
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
	var served []openapi.Operation
	if err := chi.Walk(httpapi.NewHandler(httpapi.Deps{Processes: noProcesses{}}).(chi.Routes), openapitest.Collect(&served)); err != nil {
		t.Fatal(err)
	}
	if err := openapitest.CheckRoutes(httpapi.OpenAPI, openapi.Host{Queues: []string{"workflow.request-submitted"}}, served); err != nil {
		t.Error(err)
	}
}
