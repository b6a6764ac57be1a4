package fabric_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// outageHandler answers ErrUnavailable until up is closed and otherwise
// records the order in which messages (by marker) got through.
type outageHandler struct {
	up    chan struct{}
	mu    sync.Mutex
	first time.Time // the first call
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
	if h.first.IsZero() {
		h.first = time.Now()
	}
	h.calls[p.ServiceID]++
	select {
	case <-h.up:
	default:
		return fmt.Errorf("%w: the object store refuses connections", fabric.ErrUnavailable)
	}
	h.done = append(h.done, p.ServiceID)
	return nil
}

func (h *outageHandler) firstCall() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
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
// the outage, the message goes back on its queue once per hold and is
// delivered again, still in order, still outside the tiers. The pauses
// scale with the hold, so a hold of a second plays a deployment's
// 10-minute hold: the ten-minute object-store outage and the one-hour SEI
// outage, in seconds, each within the queue's delivery limit.
func TestOutageKeepsMessagesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold time.Duration // 0: the default, 10 min
		// outage lasts from the first call; givenBack is how often
		// the first message must have gone back on its queue.
		outage    time.Duration
		givenBack int
	}{
		// A hold's cycle is the hold plus a redelivery, longer on a
		// loaded machine: the outages leave a fifth of a hold per cycle.
		{"held through the outage", 0, 2500 * time.Millisecond, 0},
		{"ten minutes, one hold", time.Second, 1300 * time.Millisecond, 1},
		{"an hour, six holds", time.Second, 7500 * time.Millisecond, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, 100*time.Millisecond, 100*time.Millisecond)
			h := &outageHandler{calls: map[string]int{}, up: make(chan struct{})}
			opts := fabric.ConsumerOptions{Concurrency: 1, OutageHold: tc.hold}
			if tc.givenBack > 0 {
				opts.Prefetch = 1 // the one message held is the one given back
			}
			s.run(t, h.handle, opts)
			var want []string
			for i := range 5 {
				marker := fmt.Sprintf("m%d", i)
				want = append(want, marker)
				if err := s.Pub.Publish(context.Background(), submitted(t, "org-a", marker)); err != nil {
					t.Fatal(err)
				}
			}
			fabrictest.Eventually(t, 20*time.Second, "the first call", func() bool { return !h.firstCall().IsZero() })
			fabrictest.Eventually(t, tc.outage+20*time.Second, "the outage's end", func() bool {
				return time.Since(h.firstCall()) >= tc.outage
			})
			calls, done := h.snapshot()
			if len(done) != 0 || len(calls) != 1 || calls["m0"] < 2 {
				t.Fatalf("during the outage: calls %v, done %v; want only m0 tried, again and again, nothing through", calls, done)
			}
			close(h.up)
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
			// The broker's own count (management statistics, sampled
			// every few seconds): the held message went back once per
			// hold and came again.
			var redelivered int
			fabrictest.Eventually(t, 20*time.Second, fmt.Sprintf("%d redeliveries in the queue's statistics", tc.givenBack), func() bool {
				var q struct {
					Stats struct {
						Redeliver int `json:"redeliver"`
					} `json:"message_stats"`
				}
				if err := s.Vhost.Mgmt(http.MethodGet, "/api/queues/"+url.PathEscape(s.Vhost.Name)+"/"+url.PathEscape(s.spec.Queue), nil, &q); err != nil {
					t.Fatal(err)
				}
				redelivered = q.Stats.Redeliver
				return redelivered >= tc.givenBack
			})
			if redelivered > tc.givenBack+2 {
				t.Errorf("%d redeliveries, want about %d: one per hold", redelivered, tc.givenBack)
			}
		})
	}
}
