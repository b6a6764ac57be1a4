package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
)

var env = fabrictest.EnvFrom(os.Getenv)

func fabricctl(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, getenv, &out, &errOut); err != nil {
		t.Fatalf("fabricctl %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

func TestCatalogAndTopologyCommands(t *testing.T) {
	none := func(string) string { return "" }
	list := fabricctl(t, none, "catalog", "list")
	for _, typ := range []string{"request.submitted.v1", "ai.knowledge.index.v1", "document.ocr.v1"} {
		if !strings.Contains(list, typ) {
			t.Errorf("catalog list lacks %s", typ)
		}
	}
	if show := fabricctl(t, none, "catalog", "show", "request.submitted.v1"); !strings.Contains(show, `"$schema"`) || !strings.Contains(show, "RESOURCE") {
		t.Errorf("catalog show = %s", show)
	}
	topo := fabricctl(t, none, "topology", "show")
	for _, q := range []string{"workflow.request-submitted.retry.3", "ai.knowledge-builder.dlq", "x-delivery-limit"} {
		if !strings.Contains(topo, q) {
			t.Errorf("topology show lacks %s", q)
		}
	}
	var errOut bytes.Buffer
	if err := run(context.Background(), []string{"catalog", "show", "nope.v1"}, none, &bytes.Buffer{}, &errOut); err == nil {
		t.Error("catalog show of an unknown type = nil error")
	}
}

// dlqRig gives a test its own vhost, an audit schema dropped at cleanup,
// and fabricctl's environment for them with an operator set.
func dlqRig(t *testing.T) (*fabrictest.Vhost, string, func(string) string) {
	t.Helper()
	vh := fabrictest.NewVhost(t, env)
	schema := "fabricctl_audit_" + strings.ToLower(strings.ReplaceAll(vh.Name[len(vh.Name)-8:], "-", ""))
	getenv := func(k string) string {
		switch k {
		case "AMQP_URL":
			return vh.URL
		case "RABBITMQ_MGMT_URL":
			return env.MgmtURL
		case "DATABASE_URL":
			return env.DatabaseURL
		case "FABRIC_OPERATOR":
			return "ops-ana"
		}
		return ""
	}
	t.Cleanup(func() {
		pool, err := pgxpool.New(context.Background(), env.DatabaseURL)
		if err == nil {
			pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			pool.Close()
		}
	})
	return vh, schema, getenv
}

func TestDLQReplayDryRunThenReplayIsAudited(t *testing.T) {
	vh, schema, getenv := dlqRig(t)
	if out := fabricctl(t, getenv, "topology", "apply"); !strings.Contains(out, "applied: 5 exchanges") {
		t.Fatalf("topology apply = %s", out)
	}
	// Three dead letters in workflow.request-submitted.dlq, as a consumer leaves them.
	conn := vh.Dial(t)
	ch, err := conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var ids []string
	for i := 0; i < 3; i++ {
		e, _ := envelope.New("request.submitted.v1", "org-a", "test", map[string]any{
			"requestId": "0192d3a0-0000-7000-8000-000000000001", "protocol": "AGR-2026-000001", "serviceId": "s",
			"formId": "f", "formVersion": 1, "channel": "web", "citizenId": "c", "submittedAt": "2026-11-30T10:00:00Z"})
		body, _ := e.Encode()
		ids = append(ids, e.ID)
		if err := ch.PublishWithContext(context.Background(), "", "workflow.request-submitted.dlq", false, false, amqp.Publishing{
			MessageId: e.ID, Type: e.Type, Body: body, Headers: amqp.Table{wire.HeaderTenant: "org-a", wire.HeaderReason: wire.ReasonPermanent, wire.HeaderAttempts: int32(1)}}); err != nil {
			t.Fatal(err)
		}
	}
	q := "--queue=workflow.request-submitted"
	var out string
	fabrictest.Eventually(t, 10*time.Second, "the three dead letters listed", func() bool {
		out = fabricctl(t, getenv, "dlq", "list", q, "--audit-schema="+schema)
		return strings.Count(out, "PERMANENT_FAILURE") == 3
	})
	dry := fabricctl(t, getenv, "dlq", "replay", q, "--all", "--reason=smoke test", "--dry-run", "--audit-schema="+schema)
	if !strings.Contains(dry, "dry run: 3 letters would be replayed") {
		t.Fatalf("dry run = %s", dry)
	}
	one := fabricctl(t, getenv, "dlq", "replay", q, "--ids="+ids[1], "--reason=smoke test", "--audit-schema="+schema)
	if !strings.Contains(one, "1 replayed, 0 failed") || !strings.Contains(one, ids[1]) {
		t.Fatalf("replay one = %s", one)
	}
	var rest, progressOut bytes.Buffer
	if err := run(context.Background(), []string{"dlq", "replay", q, "--all", "--reason=smoke test", "--audit-schema=" + schema}, getenv, &rest, &progressOut); err != nil {
		t.Fatalf("replay rest: %v\n%s", err, progressOut.String())
	}
	if !strings.Contains(rest.String(), "2 replayed, 0 failed") {
		t.Fatalf("replay rest = %s", rest.String())
	}
	// Progress on stderr ends with the whole count, the rate and the time.
	if p := progressOut.String(); !strings.Contains(p, "2/2 letters examined, ") || !strings.Contains(p, "/s, done in ") {
		t.Errorf("replay progress = %q, want 2/2 letters examined with a rate and the time taken", p)
	}
	back, err := ch.QueueDeclarePassive("workflow.request-submitted", true, false, false, false, nil)
	if err != nil || back.Messages != 3 {
		t.Fatalf("consumer queue holds %d after replay, want 3 (%v)", back.Messages, err)
	}
	audit := fabricctl(t, getenv, "dlq", "audit", "--audit-schema="+schema)
	if strings.Count(audit, "ops-ana") != 3 || !strings.Contains(audit, "replay-dry-run") {
		t.Fatalf("audit = %s", audit)
	}
	var errOut bytes.Buffer
	noOp := func(k string) string {
		if k == "FABRIC_OPERATOR" {
			return ""
		}
		return getenv(k)
	}
	if err := run(context.Background(), []string{"dlq", "replay", q, "--all", "--reason=x", "--audit-schema=" + schema}, noOp, &bytes.Buffer{}, &errOut); err == nil {
		t.Error("replay without an operator = nil error")
	}
}

// TestDLQReplayRefusesNotReplayableTypes: fabricctl dlq replay leaves a
// communication.send.v1 letter in its DLQ and fails naming the type; purge
// still removes it.
func TestDLQReplayRefusesNotReplayableTypes(t *testing.T) {
	vh, schema, getenv := dlqRig(t)
	fabricctl(t, getenv, "topology", "apply")
	conn := vh.Dial(t)
	ch, err := conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	const dlqName = "communication.send-commands.dlq"
	e, err := envelope.New("communication.send.v1", "org-a", "test", map[string]any{"channel": "sms", "recipientRef": "c-1", "template": "t"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := e.Encode()
	if err := ch.PublishWithContext(context.Background(), "", dlqName, false, false, amqp.Publishing{
		MessageId: e.ID, Type: e.Type, Body: body, Headers: amqp.Table{wire.HeaderTenant: "org-a", wire.HeaderReason: wire.ReasonPermanent}}); err != nil {
		t.Fatal(err)
	}
	depth := func() int {
		q, err := ch.QueueDeclarePassive(dlqName, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}
	fabrictest.Eventually(t, 5*time.Second, "the letter in "+dlqName, func() bool { return depth() == 1 })
	q := "--queue=communication.send-commands"
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"dlq", "replay", q, "--all", "--reason=retry the sms", "--audit-schema=" + schema}, getenv, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "communication.send.v1") || !strings.Contains(out.String(), "0 replayed") {
		t.Fatalf("dlq replay = %v\n%s", err, out.String())
	}
	fabrictest.Eventually(t, 5*time.Second, "the refused letter still in "+dlqName, func() bool { return depth() == 1 })
	if got := fabricctl(t, getenv, "dlq", "purge", q, "--ids="+e.ID, "--reason=not to be sent twice", "--audit-schema="+schema); !strings.Contains(got, "1 purged") {
		t.Fatalf("dlq purge = %s", got)
	}
	if audit := fabricctl(t, getenv, "dlq", "audit", "--audit-schema="+schema); !strings.Contains(audit, "purge") {
		t.Errorf("audit = %s", audit)
	}
}
