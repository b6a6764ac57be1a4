package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// A broker an earlier version set up has platform.commands, platform.work
// and platform.dead-letter as direct exchanges, where topic permissions do
// not apply. check names them; apply declares them again as topic
// exchanges with the description's bindings, after which commands and dead
// letters are routed as before. Without upgradeExchanges, check after apply
// still fails.
func TestTopologyApplyUpgradesDirectExchanges(t *testing.T) {
	vh := fabrictest.NewVhost(t, env)
	getenv := tierEnv(vh)
	const queue = "upgrade.commands"
	file := filepath.Join(t.TempDir(), "commands.yaml")
	if err := os.WriteFile(file, []byte(`consumers:
  - queue: `+queue+`
    service: upgrade
    bindings:
      - {exchange: platform.commands, key: workflow.start.v1}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(vh.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range topology.PlatformExchanges() {
		typ := e.Type
		if e.Name != topology.EventsExchange && e.Name != topology.RetryExchange {
			typ = amqp.ExchangeDirect
		}
		if err := ch.ExchangeDeclare(e.Name, typ, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}

	var buf bytes.Buffer
	err = run(context.Background(), []string{"topology", "check", "--file", file}, getenv, &buf, &buf)
	for _, ex := range []string{topology.CommandsExchange, topology.WorkExchange, topology.DeadLetterExchange} {
		if err == nil || !strings.Contains(buf.String(), ex+": a direct exchange, want topic") {
			t.Fatalf("check before the upgrade = %v, want %s named:\n%s", err, ex, buf.String())
		}
	}
	buf.Reset()
	if err := run(context.Background(), []string{"topology", "apply", "--file", file}, getenv, &buf, &buf); err != nil {
		t.Fatalf("apply: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "(3 upgraded)") {
		t.Errorf("apply output does not report 3 exchanges upgraded:\n%s", buf.String())
	}
	buf.Reset()
	if err := run(context.Background(), []string{"topology", "check", "--file", file}, getenv, &buf, &buf); err != nil {
		t.Fatalf("check after apply = %v:\n%s", err, buf.String())
	}
	// The binding came back: a command is routed to the queue, and a dead
	// letter to its DLQ.
	p := newPublisher(t, vh)
	p.many(topology.CommandsExchange, "workflow.start.v1", "cmd", 3, "")
	p.many(topology.DeadLetterExchange, queue, "letter", 2, "")
	fabrictest.Eventually(t, 10*time.Second, "3 commands in "+queue+" and 2 letters in its DLQ", func() bool {
		return depth(t, vh, queue) == 3 && depth(t, vh, queue+".dlq") == 2
	})
}
