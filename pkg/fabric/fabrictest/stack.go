package fabrictest

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Fabric is a publisher on a fresh vhost with a topology applied (and
// reapplied on every reconnect).
type Fabric struct {
	Vhost *Vhost
	Conn  *broker.Conn
	Reg   *registry.Registry
	Pub   *broker.Publisher
	Desc  topology.Description
}

// NewFabric creates a vhost, applies desc and opens a publisher.
func NewFabric(t testing.TB, env Env, desc topology.Description) *Fabric {
	t.Helper()
	vh := NewVhost(t, env)
	conn := vh.Dial(t, func(ctx context.Context, c *amqp.Connection) error { return topology.Apply(ctx, c, desc) })
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return &Fabric{Vhost: vh, Conn: conn, Reg: reg, Pub: pub, Desc: desc}
}

// Depth returns the number of ready messages in queue.
func (f *Fabric) Depth(t testing.TB, queue string) int {
	t.Helper()
	ch, err := f.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("inspect %s: %v", queue, err)
	}
	return q.Messages
}

// Drain gets and acks every ready message of queue.
func (f *Fabric) Drain(t testing.TB, queue string) []amqp.Delivery {
	t.Helper()
	ch, err := f.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatalf("get %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
}

// Run starts a consumer on spec and stops it (checking Run's error) at
// cleanup. It returns a stop function for tests that stop it earlier.
func (f *Fabric) Run(t testing.TB, spec topology.Consumer, h fabric.Handler, opts fabric.ConsumerOptions) (stop func()) {
	t.Helper()
	c, err := broker.NewConsumer(f.Conn, f.Pub, f.Reg, spec, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return runConsumer(t, spec, c)
}

// RunBatch is Run for a batch handler.
func (f *Fabric) RunBatch(t testing.TB, spec topology.Consumer, h fabric.BatchHandler, opts fabric.ConsumerOptions) (stop func()) {
	t.Helper()
	c, err := broker.NewConsumer(f.Conn, f.Pub, f.Reg, spec, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return runConsumer(t, spec, c)
}

func runConsumer(t testing.TB, spec topology.Consumer, c *broker.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer %s Run: %v", spec.Queue, err)
		}
	}
	t.Cleanup(stop)
	return stop
}
