package deploytest_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// A service that starts publishing a type its broker user is not granted
// fails in tests exactly as in production: the broker refuses the publish
// (ACCESS_REFUSED, 403). The granted rows are the positive control: the
// same publisher, the same message, another user, confirmed.
func TestPublishUnderServiceGrants(t *testing.T) {
	env := fabrictest.EnvFrom(os.Getenv)
	vh := fabrictest.NewVhost(t, env)
	users := deploytest.NewBroker(t, vh)

	// Something bound to every event, so a granted publish is routed
	// (the publisher is mandatory: unroutable would be an error too).
	admin := vh.Dial(t)
	ch, err := admin.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("observer", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("observer", "#", topology.EventsExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	ch.Close()

	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	submitted := map[string]any{"requestId": uuid.NewString(), "protocol": "AG-GRANT01", "serviceId": "iptu",
		"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c-1", "submittedAt": time.Now().UTC().Format(time.RFC3339)}
	cases := []struct {
		service     string
		typ         string
		wantRefused bool
	}{
		{"request", "request.submitted.v1", false},
		{"analytics", "request.submitted.v1", true},     // analytics publishes nothing
		{"workflow", "request.submitted.v1", true},      // another service's event
		{"communication", "request.submitted.v1", true}, // likewise
	}
	for _, c := range cases {
		t.Run(c.service+"/"+c.typ, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			conn, err := broker.Dial(ctx, users.URL(c.service), broker.Options{Name: c.service, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
			if err != nil {
				t.Fatalf("dial as %s: %v", users.User(c.service), err)
			}
			defer conn.Close()
			pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{ConfirmTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			e, err := envelope.New(c.typ, "org-a", c.service, submitted)
			if err != nil {
				t.Fatal(err)
			}
			err = pub.Publish(ctx, e)
			var aerr *amqp.Error
			refused := errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused
			switch {
			case c.wantRefused && !refused:
				t.Fatalf("%s publishing %s: err = %v, want ACCESS_REFUSED", users.User(c.service), c.typ, err)
			case !c.wantRefused && err != nil:
				t.Fatalf("%s publishing %s: %v, want confirmed", users.User(c.service), c.typ, err)
			}
		})
	}
}
