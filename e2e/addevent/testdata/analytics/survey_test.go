package survey_test

import (
	"context"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/analytics/internal/survey"
)

type recorded struct {
	tenant string
	answer survey.Answer
}

// Analytics, under its own broker grants, declares and consumes its queue;
// an answer the request service publishes under its grants reaches the
// handler with its tenant.
func TestHandlerReceivesAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vh := fabrictest.NewVhost(t, fabrictest.EnvFrom(os.Getenv))
	b := deploytest.NewBroker(t, vh, "request", "analytics")
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := topology.Platform().Consumer("analytics.surveys")
	if !ok {
		t.Fatal("the catalog declares no analytics.surveys queue")
	}
	// Analytics declares its own queue, as it does at start-up (the hook
	// runs on every connect, before the connection hands out channels).
	conn, err := broker.Dial(ctx, b.URL("analytics"), broker.Options{TLS: vh.TLS}, func(ctx context.Context, c *amqp.Connection) error {
		return topology.Apply(ctx, c, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	got := make(chan recorded, 1)
	c, err := broker.NewConsumer(conn, pub, reg, spec, survey.Handler(func(_ context.Context, tenantID string, a survey.Answer) error {
		got <- recorded{tenantID, a}
		return nil
	}), fabric.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
	}()

	// The request service's side: its own user, the catalog's route.
	reqConn, err := broker.Dial(ctx, b.URL("request"), broker.Options{TLS: vh.TLS})
	if err != nil {
		t.Fatal(err)
	}
	defer reqConn.Close()
	reqPub, err := broker.NewPublisher(reqConn, reg, broker.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reqPub.Close()
	want := survey.Answer{RequestID: "0190f1c2-7d4e-7a00-8000-000000000002", Score: 4}
	e, err := envelope.New("survey.answered.v1", "tenant-b", "request", want)
	if err != nil {
		t.Fatal(err)
	}
	if err := reqPub.Publish(ctx, e); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.tenant != "tenant-b" || r.answer != want {
			t.Errorf("handler got %+v for %s, want %+v for tenant-b", r.answer, r.tenant, want)
		}
	case <-ctx.Done():
		t.Fatal("the handler never received the answer")
	}
}
