package host_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/host"
)

// A service names its queues; one the catalog does not declare stops the
// start before anything is dialled, with the fix in the message.
func TestNewRefusesAQueueTheCatalogDoesNotDeclare(t *testing.T) {
	_, err := host.New(context.Background(), host.Config{Service: "analytics"},
		host.Options{Queues: []string{"analytics.request-events", "analytics.no-such-queue"}}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "analytics.no-such-queue") || !strings.Contains(err.Error(), "catalog.yaml") {
		t.Fatalf("New = %v, want an error naming analytics.no-such-queue and the catalog", err)
	}
}
