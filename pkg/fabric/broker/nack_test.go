package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// A nacked publish retires its channel: the next publish goes out on a
// new one, and the old one closes once nothing waits on it. (On RabbitMQ
// 3.10 a channel could keep nacking a quorum queue whose leader it had lost
// in a partition while a new channel was acked: e2e/cluster_test.go.) The
// nack here is a full queue's (reject-publish).
func TestANackRetiresTheChannel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := broker.Dial(ctx, liveNode(), broker.Options{Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q := fmt.Sprintf("broker-test-nack-%d", time.Now().UnixNano())
	if _, err := ch.QueueDeclare(q, false, false, true, false, amqp.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	pub, err := broker.NewPublisher(c, nil, broker.PublisherOptions{ConfirmTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	send := func(id string) error {
		pd, err := pub.Send(ctx, broker.Message{RoutingKey: q, Body: []byte(id), MessageID: id})
		if err != nil {
			return err
		}
		return pd.Wait(ctx)
	}
	if err := send("first"); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	first := pub.CurrentChannel()
	err = send("second")
	if err == nil || !strings.Contains(err.Error(), "nacked") {
		t.Fatalf("publish to a full queue: %v, want a nack", err)
	}
	if _, err := ch.QueuePurge(q, false); err != nil {
		t.Fatal(err)
	}
	if err := send("third"); err != nil {
		t.Fatalf("publish after the nack: %v", err)
	}
	if pub.CurrentChannel() == first {
		t.Error("the publish after a nack went out on the nacked channel")
	}
	old, ok := first.(*amqp.Channel)
	if !ok {
		t.Fatalf("no channel before the nack: %v", first)
	}
	fabrictest.Eventually(t, 10*time.Second, "the nacked channel closed", old.IsClosed)
	if _, err := ch.QueueDelete(q, false, false, false); err != nil && !errors.Is(err, amqp.ErrClosed) {
		t.Error(err)
	}
}
