package fabric_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

func TestPublishConfirmsRoutesAndReturns(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if err := s.Pub.Publish(ctx, submitted(t, "org-a", "ok")); err != nil {
		t.Fatalf("Publish routed: %v", err)
	}
	// No queue is bound to citizen.updated.v1 in this vhost: the broker acks
	// it anyway; only the mandatory return tells us.
	e, err := envelope.New("citizen.updated.v1", "org-a", "test", map[string]any{"citizenId": "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pub.Publish(ctx, e); !errors.Is(err, broker.ErrUnroutable) {
		t.Fatalf("Publish unroutable = %v, want ErrUnroutable", err)
	}
	bad := submitted(t, "org-a", "x")
	bad.Payload = []byte(`{"requestId":"nope"}`)
	if err := s.Pub.Publish(ctx, bad); !errors.Is(err, registry.ErrSchema) {
		t.Fatalf("Publish schema-invalid = %v, want ErrSchema", err)
	}

	// Pipelined: 2,000 in flight through a window of 256, interleaved with
	// unroutable ones; every routed one confirmed, every unroutable one not.
	var pend, unr []*broker.Pending
	for i := 0; i < 2000; i++ {
		p, err := s.Pub.PublishAsync(ctx, submitted(t, "org-a", "bulk"))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
		if i%100 == 0 {
			u, _ := envelope.New("citizen.updated.v1", "org-a", "test", map[string]any{"citizenId": "c"})
			p, err := s.Pub.PublishAsync(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			unr = append(unr, p)
		}
	}
	for _, p := range pend {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("pipelined publish: %v", err)
		}
	}
	for _, p := range unr {
		if err := p.Wait(ctx); !errors.Is(err, broker.ErrUnroutable) {
			t.Fatalf("pipelined unroutable = %v, want ErrUnroutable", err)
		}
	}
	if n := s.Depth(t, testQueue); n != 2001 {
		t.Fatalf("queue depth = %d, want 2001", n)
	}
}

func TestMessageAndPropertiesCarryContract(t *testing.T) {
	s := newStack(t)
	e := submitted(t, "org-a", "props")
	if err := s.Pub.Publish(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	ch, _ := s.Conn.Channel(context.Background())
	defer ch.Close()
	d, ok, err := ch.Get(testQueue, true)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if d.MessageId != e.ID || d.CorrelationId != e.CorrelationID || d.Type != e.Type ||
		d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent ||
		!d.Timestamp.Equal(e.OccurredAt.Truncate(time.Second)) || d.Headers[wire.HeaderTenant] != "org-a" {
		t.Fatalf("delivery properties = %+v", d)
	}
	// Only the headers a consumer reads: the broker stores and copies
	// every header of every message. (A quorum queue adds its own
	// x-delivery-count on delivery.)
	for k := range d.Headers {
		if k != wire.HeaderTenant && k != "traceparent" && k != "tracestate" && k != "x-delivery-count" {
			t.Errorf("header %s = %v: no consumer reads it", k, d.Headers[k])
		}
	}
}

// TestPublishHonoursEachCallersDeadlineWhileTheChannelIsDown: with the
// broker unreachable (the vhost refuses the user, its connections closed),
// a caller with a 50 ms deadline returns in about that time even while
// another caller waits for a channel with a long one; once the broker is
// back, publishing resumes.
func TestPublishHonoursEachCallersDeadlineWhileTheChannelIsDown(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	if err := s.Pub.Publish(ctx, submitted(t, "org-a", "ok")); err != nil {
		t.Fatal(err)
	}
	perms := "/api/permissions/" + url.PathEscape(s.Vhost.Name) + "/" + url.PathEscape(s.Vhost.Env.User)
	if err := s.Vhost.Mgmt(http.MethodDelete, perms, nil, nil); err != nil {
		t.Fatal(err)
	}
	grant := func() error {
		return s.Vhost.Mgmt(http.MethodPut, perms, map[string]string{"configure": ".*", "write": ".*", "read": ".*"}, nil)
	}
	t.Cleanup(func() { _ = grant() })
	if n := s.Vhost.CloseConnections(t); n == 0 {
		t.Fatal("no connection closed")
	}

	const long = 3 * time.Second
	longDone := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		lctx, cancel := context.WithTimeout(ctx, long)
		defer cancel()
		close(started)
		longDone <- s.Pub.Publish(lctx, submitted(t, "org-a", "ok"))
	}()
	<-started
	// Several short callers one after the other: whichever order the
	// first of them and the long caller reach the channel in, the later
	// ones find the long caller waiting for it.
	for i := range 5 {
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		begin := time.Now()
		err := s.Pub.Publish(sctx, submitted(t, "org-a", "ok"))
		took := time.Since(begin)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("short caller %d: Publish = %v, want its deadline exceeded", i, err)
		}
		if took > 500*time.Millisecond {
			t.Fatalf("short caller %d returned after %s, want about its 50 ms deadline", i, took)
		}
	}
	select {
	case err := <-longDone:
		t.Fatalf("the long caller returned (%v) while the broker was still unreachable", err)
	default:
	}
	if err := <-longDone; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("long caller: Publish = %v, want its deadline exceeded", err)
	}

	if err := grant(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := s.Pub.Publish(rctx, submitted(t, "org-a", "ok")); err != nil {
		t.Fatalf("Publish once the broker is back: %v", err)
	}
}
