package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/dlq"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// TestPurgedLettersStayPurged purges thousands of letters and checks that
// none of them comes back once the DLQ has let go of the purge's channel:
// an ack the quorum queue never applied would return its letter when the
// channel closed.
func TestPurgedLettersStayPurged(t *testing.T) {
	f := fabrictest.NewFabric(t, env, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	s := fabrictest.NewSchema(t, env)
	ops := dlq.New(f.Conn, f.Pub, f.Reg, s.Pool, s.Name)
	const n = 2000
	fill(t, f, spec.DLQ(), n)

	rep, err := ops.Purge(context.Background(), dlq.Request{Queue: spec.Queue, Filter: dlq.Filter{All: true}, Operator: "ops@test", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Succeeded != n {
		t.Fatalf("purged %d letters, want %d", rep.Succeeded, n)
	}
	if back := finalDepth(t, f, spec.DLQ()); back != 0 {
		t.Fatalf("%d of %d purged letters are back in the DLQ: acks were lost when the channel closed", back, n)
	}
}

// fill puts n letters straight into queue, confirmed.
func fill(t *testing.T, f *fabrictest.Fabric, queue string, n int) {
	t.Helper()
	ch, err := f.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := make([]*amqp.DeferredConfirmation, 0, n)
	for i := range n {
		c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false,
			amqp.Publishing{MessageId: fmt.Sprintf("letter-%d", i), Type: "request.submitted.v1", Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		confirms = append(confirms, c)
	}
	for _, c := range confirms {
		if !c.Wait() {
			t.Fatal("a letter was not confirmed")
		}
	}
}

// finalDepth returns queue's depth once nobody holds its messages: a
// quorum queue counts whoever took messages without settling them (a
// consumer, or a channel's basic.get) until they are settled or, when the
// channel goes, returned, so with the count at 0 the depth no longer moves
// on their account.
func finalDepth(t *testing.T, f *fabrictest.Fabric, queue string) int {
	t.Helper()
	ch, err := f.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var depth int
	fabrictest.Eventually(t, 10*time.Second, queue+" without holders", func() bool {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		depth = q.Messages
		return q.Consumers == 0
	})
	return depth
}
