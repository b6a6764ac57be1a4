package systems_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
)

// TestDLQToolingFollowsTheTopology: the DLQ operations read a topology's
// own DLQ and replay through its retry exchange. In imóveis' one shared
// imoveis.dlq, a queue's letters are those its consumer dead-lettered:
// the removal worker's letter is listed and replayed under
// imoveis.remocao (and handled, once its handler is fixed), while the
// processing worker's letter stays where it is.
func TestDLQToolingFollowsTheTopology(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "imoveis")
	audit := fabrictest.NewSchema(t, testEnv)
	byType := map[string]envelope.Envelope{}
	for _, e := range s.golden(t) {
		byType[e.Type] = e
	}
	var fixed atomic.Bool
	handled := make(chan string, 4)
	s.Run(t, s.consumer(t, "imoveis.processamento"), func(ctx context.Context, e envelope.Envelope) error {
		if e.Type == "imovel.atualizado.v1" {
			return fabric.Permanent(errors.New("listing unknown"))
		}
		return nil
	}, fabric.ConsumerOptions{Codec: s.codec})
	s.Run(t, s.consumer(t, "imoveis.remocao"), func(ctx context.Context, e envelope.Envelope) error {
		if !fixed.Load() {
			return fabric.Invalid(errors.New("codigo not in the source"))
		}
		handled <- e.ID
		return nil
	}, fabric.ConsumerOptions{Codec: s.codec})
	updated, removed := byType["imovel.atualizado.v1"], byType["imovel.removido.v1"]
	for _, e := range []envelope.Envelope{updated, removed} {
		if err := s.Pub.Publish(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	ops := dlq.New(s.Conn, s.Pub, s.Reg, audit.Pool, audit.Name).For(s.Desc.Consumers...)
	ctx := context.Background()
	letters := func(queue string) []dlq.Letter {
		t.Helper()
		l, err := ops.List(ctx, queue, 0)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	fabrictest.Eventually(t, 20*time.Second, "one letter of each worker in imoveis.dlq", func() bool {
		return len(letters("imoveis.remocao")) == 1 && len(letters("imoveis.processamento")) == 1
	})
	if l := letters("imoveis.remocao"); l[0].MessageID != removed.ID {
		t.Fatalf("imoveis.remocao's letter is %s, want the removal %s", l[0].MessageID, removed.ID)
	}
	fixed.Store(true)
	rep, err := ops.Replay(ctx, dlq.Request{Queue: "imoveis.remocao", Filter: dlq.Filter{All: true}, Operator: "olga", Reason: "source fixed"})
	if err != nil || rep.Succeeded != 1 {
		t.Fatalf("replay: %+v, %v", rep, err)
	}
	select {
	case id := <-handled:
		if id != removed.ID {
			t.Errorf("handled %s, want the replayed removal %s", id, removed.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the replayed letter was not handled (imoveis.retry → imoveis.remocao)")
	}
	if l := letters("imoveis.remocao"); len(l) != 0 {
		t.Errorf("imoveis.remocao still has %d letters", len(l))
	}
	if l := letters("imoveis.processamento"); len(l) != 1 || l[0].MessageID != updated.ID {
		t.Errorf("imoveis.processamento's letters %+v, want the update %s left in place", l, updated.ID)
	}
}
