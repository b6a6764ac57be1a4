package survey_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
	"github.com/agora-platform/agora/services/request/internal/survey"
)

// The request service, under its own broker grants, publishes the answer,
// and the broker routes it to the queue analytics declares for it.
func TestPublishReachesTheAnalyticsQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vh := fabrictest.NewVhost(t, fabrictest.EnvFrom(os.Getenv))
	b := deploytest.NewBroker(t, vh, "request", "analytics")
	spec, ok := topology.Platform().Consumer("analytics.surveys")
	if !ok {
		t.Fatal("the catalog declares no analytics.surveys queue")
	}
	// Analytics declares its own queue, as it does at start-up.
	analytics, err := broker.Dial(ctx, b.URL("analytics"), broker.Options{TLS: vh.TLS}, func(ctx context.Context, c *amqp.Connection) error {
		return topology.Apply(ctx, c, topology.Description{Exchanges: topology.PlatformExchanges(), Consumers: []topology.Consumer{spec}})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer analytics.Close()
	conn, err := broker.Dial(ctx, b.URL("request"), broker.Options{TLS: vh.TLS})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	want := survey.Answer{RequestID: "0190f1c2-7d4e-7a00-8000-000000000001", Score: 5}
	if err := survey.Publish(ctx, pub, "tenant-a", want); err != nil {
		t.Fatal(err)
	}
	ch, err := analytics.Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var d amqp.Delivery
	fabrictest.Eventually(t, 30*time.Second, "the answer in analytics.surveys", func() bool {
		var got bool
		if d, got, err = ch.Get(spec.Queue, true); err != nil {
			t.Fatal(err)
		}
		return got
	})
	e, err := envelope.Decode(d.Body, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got survey.Answer
	if err := json.Unmarshal(e.Payload, &got); err != nil {
		t.Fatal(err)
	}
	if e.Type != survey.Type || e.TenantID != "tenant-a" || got != want {
		t.Errorf("got %s for %s with %+v, want %s for tenant-a with %+v", e.Type, e.TenantID, got, survey.Type, want)
	}
}

// The schema is the catalog's: a score out of range is refused before it
// leaves the service.
func TestPublishRefusesAnInvalidAnswer(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	e, err := envelope.New(survey.Type, "tenant-a", "request", survey.Answer{RequestID: "0190f1c2-7d4e-7a00-8000-000000000001", Score: 9})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Check(e); err == nil {
		t.Fatal("a score of 9 passed the catalog's schema")
	}
}
