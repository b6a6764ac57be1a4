package main

import (
	"context"
	"fmt"
	"io"
	"net/http"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// exchanges lists the vhost's exchanges by name, with their type.
func (m *mgmtClient) exchanges(ctx context.Context) (map[string]string, error) {
	var es []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	if err := m.do(ctx, http.MethodGet, m.path("exchanges")+"?columns=name,type", nil, &es); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(es))
	for _, e := range es {
		out[e.Name] = e.Type
	}
	return out, nil
}

// mistyped returns the description's exchanges the broker has with another
// type, as "name: broker type → wanted type". The fabric checks exchanges
// passively, which does not compare types, so an exchange an earlier
// version declared direct (platform.commands, platform.work and
// platform.dead-letter were) keeps working, but the topic permissions that
// hold each service to its own keys do not apply to it.
func mistyped(ctx context.Context, m *mgmtClient, d topology.Description) (map[string]string, error) {
	have, err := m.exchanges(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range d.Exchanges {
		if t, ok := have[e.Name]; ok && t != e.Type {
			out[e.Name] = fmt.Sprintf("%s: a %s exchange, want %s", e.Name, t, e.Type)
		}
	}
	return out, nil
}

// upgradeExchanges redeclares each mistyped exchange with its type: it is
// deleted and declared again at once, and topology.Apply, which runs next,
// binds the description's queues to it again. In between (milliseconds) a
// message published to it is returned to its publisher, which retries, and
// a message the broker dead-letters to it is dropped; run it with the
// consumers stopped where that matters. Bindings to it that the
// description does not declare are not restored.
func upgradeExchanges(ctx context.Context, conn *amqp.Connection, m *mgmtClient, d topology.Description, out io.Writer) (int, error) {
	wrong, err := mistyped(ctx, m, d)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range d.Exchanges {
		what, ok := wrong[e.Name]
		if !ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		ch, err := conn.Channel()
		if err != nil {
			return n, fmt.Errorf("upgrade exchange %s: %w", e.Name, err)
		}
		err = ch.ExchangeDelete(e.Name, false, false)
		if err == nil {
			err = ch.ExchangeDeclare(e.Name, e.Type, true, false, false, false, nil)
		}
		ch.Close()
		if err != nil {
			return n, fmt.Errorf("upgrade exchange %s (run apply again to finish): %w", e.Name, err)
		}
		n++
		fmt.Fprintf(out, "upgraded %s: declared again as %s; its bindings follow\n", what, e.Type)
	}
	return n, nil
}
