package fabric_test

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// TestBrokerRestart stops and starts the RabbitMQ application under a
// running publisher and consumer. It disturbs every client of the node, so
// `make test` runs it alone after all other tests.
func TestBrokerRestart(t *testing.T) {
	s := newStack(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	s.run(t, func(ctx context.Context, e envelope.Envelope) error {
		mu.Lock()
		seen[e.ID] = true
		mu.Unlock()
		return nil
	}, fabric.ConsumerOptions{})
	var sent []string
	lost := 0
	publish := func(n int) {
		for i := 0; i < n; i++ {
			e := submitted(t, "org-a", "ok")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := s.Pub.Publish(ctx, e)
			cancel()
			switch {
			case err == nil:
				sent = append(sent, e.ID)
			case errors.Is(err, fabric.ErrConnectionLost):
				lost++
			default:
				t.Fatalf("publish: %v", err)
			}
		}
	}
	publish(200)
	before := s.Conn.Connects()
	for _, args := range [][]string{{"stop_app"}, {"start_app"}, {"await_startup"}} {
		if out, err := exec.Command("rabbitmqctl", args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %v: %v: %s", args, err, out)
		}
	}
	// Publishing blocks until the supervisor has reconnected.
	publish(200)
	if s.Conn.Connects() <= before {
		t.Fatalf("connects = %d after restart, want > %d", s.Conn.Connects(), before)
	}
	fabrictest.Eventually(t, 60*time.Second, "every confirmed message consumed after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range sent {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	t.Logf("broker restarted: confirmed %d, unconfirmed (reported lost) %d, all confirmed ones consumed", len(sent), lost)
}
