package fabric_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// outageHandler answers ErrUnavailable while down is set and otherwise
// records the order in which messages (by marker) got through.
type outageHandler struct {
	down  atomic.Bool
	mu    sync.Mutex
	calls map[string]int
	done  []string
}

func (h *outageHandler) handle(_ context.Context, env envelope.Envelope) error {
	var p struct{ ServiceID string }
	if err := jsonUnmarshal(env.Payload, &p); err != nil {
		return fabric.Invalid(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[p.ServiceID]++
	if h.down.Load() {
		return fmt.Errorf("%w: the object store refuses connections", fabric.ErrUnavailable)
	}
	h.done = append(h.done, p.ServiceID)
	return nil
}

func (h *outageHandler) snapshot() (map[string]int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	calls := make(map[string]int, len(h.calls))
	for k, v := range h.calls {
		calls[k] = v
	}
	return calls, slices.Clone(h.done)
}

// TestOutageKeepsMessagesInOrder: while a handler's dependency is down
// (ErrUnavailable) the consumer keeps the message and calls again after a
// pause, spending no retry tier (the queue's tiers are 100 ms: a retry
// would have been back long before) and sending nothing to the DLQ; the
// messages behind it wait their turn. Once the dependency is back every
// message is handled once, in the order sent. With a hold shorter than
// the outage, the message goes back on its queue and is delivered again,
// still in order, still outside the tiers.
func TestOutageKeepsMessagesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts fabric.ConsumerOptions
		// gaveBack: the hold is shorter than the outage, so the first
		// message must have been put back on its queue and redelivered.
		gaveBack bool
	}{
		{"held through the outage", fabric.ConsumerOptions{Concurrency: 1}, false},
		{"given back after its hold", fabric.ConsumerOptions{Concurrency: 1, Prefetch: 1, OutageHold: 1500 * time.Millisecond}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, 100*time.Millisecond, 100*time.Millisecond)
			h := &outageHandler{calls: map[string]int{}}
			h.down.Store(true)
			s.run(t, h.handle, tc.opts)
			var want []string
			for i := range 5 {
				marker := fmt.Sprintf("m%d", i)
				want = append(want, marker)
				if err := s.Pub.Publish(context.Background(), submitted(t, "org-a", marker)); err != nil {
					t.Fatal(err)
				}
			}
			// Three calls of the first message span two pauses (1 s, 2 s):
			// far beyond the 100 ms tiers, and with a 1.5 s hold, past it.
			fabrictest.Eventually(t, 20*time.Second, "the first message called three times", func() bool {
				calls, _ := h.snapshot()
				return calls["m0"] >= 3
			})
			calls, done := h.snapshot()
			if len(done) != 0 || len(calls) != 1 {
				t.Fatalf("during the outage: calls %v, done %v; want only m0 tried, nothing through", calls, done)
			}
			h.down.Store(false)
			fabrictest.Eventually(t, 30*time.Second, "every message through", func() bool {
				_, done := h.snapshot()
				return len(done) == len(want)
			})
			calls, done = h.snapshot()
			if !slices.Equal(done, want) {
				t.Errorf("handled in order %v, want %v", done, want)
			}
			for _, m := range want[1:] {
				if calls[m] != 1 {
					t.Errorf("%s called %d times, want once (it waited behind m0)", m, calls[m])
				}
			}
			if dead := s.dlq(t); len(dead) != 0 {
				t.Errorf("%d messages in the DLQ, want none", len(dead))
			}
			if tc.gaveBack {
				// The broker's own count (management statistics, sampled
				// every few seconds): the held message went back and came
				// again.
				fabrictest.Eventually(t, 20*time.Second, "a redelivery in the queue's statistics", func() bool {
					var q struct {
						Stats struct {
							Redeliver int `json:"redeliver"`
						} `json:"message_stats"`
					}
					if err := s.Vhost.Mgmt(http.MethodGet, "/api/queues/"+url.PathEscape(s.Vhost.Name)+"/"+url.PathEscape(s.spec.Queue), nil, &q); err != nil {
						t.Fatal(err)
					}
					return q.Stats.Redeliver >= 1
				})
			}
		})
	}
}
