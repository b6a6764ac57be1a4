package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

// TestDLQListFollowsATopologyFile: with --topology, `fabricctl dlq` reads
// the file's DLQ (car.dlq.<queue>), and refuses a queue the file does not
// have.
func TestDLQListFollowsATopologyFile(t *testing.T) {
	vh, schema, getenv := dlqRig(t)
	file := topologyFile(t, "car")
	if out := fabricctl(t, getenv, "topology", "apply", "--file", file); !strings.Contains(out, "applied: 3 exchanges") {
		t.Fatalf("topology apply --file = %s", out)
	}
	conn := vh.Dial(t)
	ch, err := conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.PublishWithContext(context.Background(), "", "car.dlq.documentos.ocr", false, false, amqp.Publishing{
		MessageId: "0192d3a0-0000-7000-8000-0000000000c1", Type: "documento.enviado",
		Body:    []byte(`{"event_id":"0192d3a0-0000-7000-8000-0000000000c1"}`),
		Headers: amqp.Table{wire.HeaderReason: wire.ReasonPermanent, wire.HeaderConsumer: "documentos.ocr"}}); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 10*time.Second, "the letter listed from car.dlq.documentos.ocr", func() bool {
		out := fabricctl(t, getenv, "dlq", "list", "--queue=documentos.ocr", "--topology="+file, "--audit-schema="+schema)
		return strings.Contains(out, "0192d3a0-0000-7000-8000-0000000000c1") && strings.Contains(out, "PERMANENT_FAILURE")
	})
	var errOut bytes.Buffer
	err = run(context.Background(), []string{"dlq", "list", "--queue=nope.queue", "--topology=" + file, "--audit-schema=" + schema},
		getenv, &bytes.Buffer{}, &errOut)
	if err == nil || !strings.Contains(err.Error(), `has no queue "nope.queue"`) {
		t.Errorf("a queue the file does not have: %v", err)
	}
}
