package fabric_test

import (
	"context"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// ownHandler is a service's own name for the handler shape.
type ownHandler func(context.Context, envelope.Envelope) error

// NewConsumer takes either shape of handler under any name, and refuses
// none at all, before touching the broker.
func TestNewConsumerTakesEitherHandlerShape(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	spec := topology.Consumer{Queue: "catalog.probe"}
	one := func(context.Context, envelope.Envelope) error { return nil }
	batch := func(context.Context, []fabric.Received) []error { return nil }
	// The connection and publisher are never used by the constructor.
	conn, pub := new(broker.Conn), new(broker.Publisher)
	for name, build := range map[string]func() (*broker.Consumer, error){
		"literal": func() (*broker.Consumer, error) {
			return broker.NewConsumer(conn, pub, reg, spec, one, fabric.ConsumerOptions{})
		},
		"Handler": func() (*broker.Consumer, error) {
			return broker.NewConsumer(conn, pub, reg, spec, fabric.Handler(one), fabric.ConsumerOptions{})
		},
		"own name": func() (*broker.Consumer, error) {
			return broker.NewConsumer(conn, pub, reg, spec, ownHandler(one), fabric.ConsumerOptions{})
		},
		"batch": func() (*broker.Consumer, error) {
			return broker.NewConsumer(conn, pub, reg, spec, batch, fabric.ConsumerOptions{})
		},
		"BatchHandler": func() (*broker.Consumer, error) {
			return broker.NewConsumer(conn, pub, reg, spec, fabric.BatchHandler(batch), fabric.ConsumerOptions{})
		},
	} {
		if c, err := build(); err != nil || c == nil {
			t.Errorf("%s: NewConsumer = %v, %v", name, c, err)
		}
	}
	if _, err := broker.NewConsumer(conn, pub, reg, spec, fabric.Handler(nil), fabric.ConsumerOptions{}); err == nil {
		t.Error("NewConsumer took a nil handler")
	}
}
