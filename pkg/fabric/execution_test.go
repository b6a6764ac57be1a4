package fabric_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
)

// TestHandlersSeeTheirExecution: through the broker, a handler of each
// kind (Handler; TxHandler under the inbox, which runs as a batch
// handler) reads its execution with fabric.ExecutionOf: the envelope's
// actor as principal, or the producer as SYSTEM when it names none; the
// correlation and causation; the entity; the workflow context and
// knowledge version the envelope's extensions carry (a malformed or
// oversized one ignored); and the release the consumer was given ("dev" when none).
func TestHandlersSeeTheirExecution(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()

	cause := submitted(t, "org-a", "cause")
	byUser := submitted(t, "org-a", "user")
	byUser.CorrelationID, byUser.CausationID = cause.CorrelationID, cause.ID
	byUser.CausationChain = []envelope.Ref{{Type: cause.Type, ID: cause.ID}}
	byUser.Actor = &envelope.Ref{Type: "USER", ID: "citizen-7"}
	byUser.Entity = &envelope.Ref{Type: "request", ID: "0192d3a0-0000-7000-8000-000000000001"}
	byUser.Extensions = map[string]json.RawMessage{
		"workflow":         json.RawMessage(`{"processId":"p-1","step":"analysis"}`),
		"knowledgeVersion": json.RawMessage(`"kv-3"`),
	}
	// No actor: its producer, "test", as SYSTEM; both extensions ignored,
	// one malformed, one oversized.
	bySystem := submitted(t, "org-a", "system")
	bySystem.Extensions = map[string]json.RawMessage{
		"knowledgeVersion": json.RawMessage(`{"not":"a string"}`),
		"workflow":         json.RawMessage(`{"processId":"p-2","step":"` + strings.Repeat("x", 201) + `"}`),
	}

	want := map[string]fabric.Execution{
		byUser.ID: {Principal: envelope.Ref{Type: "USER", ID: "citizen-7"}, CorrelationID: cause.CorrelationID, CausationID: byUser.ID,
			Entity: byUser.Entity, ProcessID: "p-1", Step: "analysis", KnowledgeVersion: "kv-3"},
		bySystem.ID: {Principal: envelope.Ref{Type: "SYSTEM", ID: "test"}, CorrelationID: bySystem.ID, CausationID: bySystem.ID},
	}
	check := func(t *testing.T, release string, got <-chan fabric.Execution, ids <-chan string) {
		t.Helper()
		for range want {
			var x fabric.Execution
			select {
			case x = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("a handler never ran")
			}
			id := <-ids // sent right after
			w := want[id]
			w.Release = release
			if !sameExecution(x, w) {
				t.Errorf("message %s: ExecutionOf = %+v (entity %v), want %+v (entity %v)", id, x, x.Entity, w, w.Entity)
			}
		}
	}
	publish := func() {
		t.Helper()
		for _, e := range []envelope.Envelope{byUser, bySystem} {
			if err := s.Pub.Publish(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("Handler", func(t *testing.T) {
		got, ids := make(chan fabric.Execution, 2), make(chan string, 2)
		stop := s.Run(t, s.spec, func(ctx context.Context, e envelope.Envelope) error {
			got <- fabric.ExecutionOf(ctx)
			ids <- e.ID
			return nil
		}, fabric.ConsumerOptions{Release: "2026.12.1", Concurrency: 1})
		defer stop()
		publish()
		check(t, "2026.12.1", got, ids)
	})

	t.Run("TxHandler", func(t *testing.T) {
		db := fabrictest.NewSchema(t, testEnv)
		in := inbox.New(db.Pool, db.Name, testQueue, inbox.Options{})
		got, ids := make(chan fabric.Execution, 2), make(chan string, 2)
		stop := s.RunBatch(t, s.spec, in.BatchHandler(func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			got <- fabric.ExecutionOf(ctx)
			ids <- e.ID
			return nil
		}), fabric.ConsumerOptions{Concurrency: 1})
		defer stop()
		publish()
		check(t, "dev", got, ids) // no release given: the default
	})

	if x := fabric.ExecutionOf(ctx); x != (fabric.Execution{}) {
		t.Errorf("outside a handler ExecutionOf = %+v, want the zero Execution", x)
	}
}

func sameExecution(a, b fabric.Execution) bool {
	ae, be := a.Entity, b.Entity
	a.Entity, b.Entity = nil, nil
	if a != b || (ae == nil) != (be == nil) {
		return false
	}
	return ae == nil || *ae == *be
}
