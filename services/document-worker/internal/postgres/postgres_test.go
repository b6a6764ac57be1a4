package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

// fakeTx takes the row's upsert; nothing else of pgx.Tx is called.
type fakeTx struct{ pgx.Tx }

func (fakeTx) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.NewCommandTag("INSERT 0 1"), nil
}

type keptOutbox struct{ items []outbox.Item }

func (o *keptOutbox) Enqueue(_ context.Context, _ outbox.Tx, items ...outbox.Item) error {
	o.items = append(o.items, items...)
	return nil
}

// Record enqueues document.processed.v1 then document.validated.v1 on the
// document's aggregate (so the relay publishes them in that order), and
// the index command on an aggregate of its own (so an unroutable event
// never holds it back), in the caller's transaction.
func TestRecordEnqueuesTheEventsInOrder(t *testing.T) {
	docID := uuid.NewString()
	cause, err := envelope.New("document.process.v1", "org-a", "request-service", map[string]any{"documentId": docID})
	if err != nil {
		t.Fatal(err)
	}
	ob := &keptOutbox{}
	res := document.Result{Uploaded: document.Uploaded{DocumentID: docID, RequestID: uuid.NewString()}, TenantID: "org-a",
		Method: document.MethodPlain, Verdict: document.Validate("Requerimento de alvará", 1)}
	if err := New(ob).Record(context.Background(), fakeTx{}, res, cause); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range ob.items {
		types = append(types, it.Envelope.Type)
	}
	if want := []string{"document.processed.v1", "document.validated.v1", "ai.knowledge.index.v1"}; !slices.Equal(types, want) {
		t.Fatalf("enqueued %v, want %v", types, want)
	}
	doc := outbox.Aggregate{Type: "document", ID: docID}
	if ob.items[0].Aggregate != doc || ob.items[1].Aggregate != doc || ob.items[2].Aggregate == doc {
		t.Errorf("aggregates %v, %v, %v; want the document's for both events and another for the command",
			ob.items[0].Aggregate, ob.items[1].Aggregate, ob.items[2].Aggregate)
	}
}
