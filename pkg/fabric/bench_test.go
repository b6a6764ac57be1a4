package fabric_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

const benchWindow = 256

// kibEnvelope returns a valid envelope of about 1 KiB (the schema caps
// field lengths, so the padding is spread over three fields).
func kibEnvelope(b testing.TB) envelope.Envelope {
	e := submitted(b, "org-a", strings.Repeat("s", 100))
	var p map[string]any
	_ = json.Unmarshal(e.Payload, &p)
	p["formId"] = strings.Repeat("f", 100)
	p["citizenId"] = strings.Repeat("c", 200)
	e.Payload, _ = json.Marshal(p)
	// Two ancestors, as a reaction two hops from a citizen's request has.
	for i := 0; i < 2; i++ {
		c, err := envelope.Derive(e, e.Type, "bench", json.RawMessage(e.Payload))
		if err != nil {
			b.Fatal(err)
		}
		e = c
	}
	if raw, _ := e.Encode(); len(raw) < 960 || len(raw) > 1100 {
		b.Fatalf("bench envelope is %d bytes, want ~1 KiB", len(raw))
	}
	return e
}

// BenchmarkPublishFabric publishes 1 KiB envelopes to a quorum queue through
// the fabric Publisher (validation, tracing hooks, mandatory, confirms) with
// a window of 256 in flight.
func BenchmarkPublishFabric(b *testing.B) {
	s := newStackB(b)
	e := kibEnvelope(b)
	ctx := context.Background()
	pend := make([]*broker.Pending, 0, b.N)
	raw, _ := e.Encode()
	b.SetBytes(int64(len(raw)))
	// Distinct ids, made before the clock starts: the raw baseline gets its
	// body ready-made too.
	envs := make([]envelope.Envelope, b.N)
	for i := range envs {
		id, _ := envelope.New(e.Type, e.TenantID, e.Producer, struct{}{})
		envs[i] = e
		envs[i].ID = id.ID
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		p, err := s.Pub.PublishAsync(ctx, envs[i])
		if err != nil {
			b.Fatal(err)
		}
		pend = append(pend, p)
	}
	waitConfirmed(b, pend)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkPublishRaw is the baseline: amqp091-go alone, same body size,
// same queue, mandatory, async confirms with the same window, and only the
// tenant header.
func BenchmarkPublishRaw(b *testing.B) {
	e := kibEnvelope(b)
	body, _ := e.Encode()
	publishRaw(b, newStackB(b), amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: e.ID, Body: body,
		Headers: amqp.Table{wire.HeaderTenant: "org-a"},
	})
}

// BenchmarkPublishRawSameMessage is amqp091-go alone sending the very
// message the fabric sends (its properties and its tenant header). The
// broker's work per message grows with its headers, so this is the
// baseline that isolates what the fabric's own code costs.
func BenchmarkPublishRawSameMessage(b *testing.B) {
	s := newStackB(b)
	m, err := broker.EnvelopeMessage(s.Reg, kibEnvelope(b))
	if err != nil {
		b.Fatal(err)
	}
	publishRaw(b, s, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: m.MessageID,
		CorrelationId: m.CorrelationID, Type: m.Type, Timestamp: m.Timestamp.UTC(), Headers: m.Headers, Body: m.Body,
	})
}

func publishRaw(b *testing.B, s *stack, pub amqp.Publishing) {
	ch, err := s.Conn.Channel(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, benchWindow+16))
	ch.NotifyReturn(make(chan amqp.Return, 16))
	b.SetBytes(int64(len(pub.Body)))
	b.ResetTimer()
	start := time.Now()
	inflight := 0
	for i := 0; i < b.N; i++ {
		for inflight >= benchWindow {
			if c := <-confirms; !c.Ack {
				b.Fatal("nack")
			}
			inflight--
		}
		if err := ch.PublishWithContext(context.Background(), "platform.events", "request.submitted.v1", true, false, pub); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if c := <-confirms; !c.Ack {
			b.Fatal("nack")
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkPublishTransport measures the Publisher without per-message
// validation and encoding: a message built once with EnvelopeMessage, sent
// with Send (how the outbox relay publishes rows validated at Enqueue).
func BenchmarkPublishTransport(b *testing.B) {
	s := newStackB(b)
	m, err := broker.EnvelopeMessage(s.Reg, kibEnvelope(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pend := make([]*broker.Pending, 0, b.N)
	b.SetBytes(int64(len(m.Body)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		p, err := s.Pub.Send(ctx, m)
		if err != nil {
			b.Fatal(err)
		}
		pend = append(pend, p)
	}
	waitConfirmed(b, pend)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkEnvelopeMessage is the publisher's own work per 1 KiB envelope,
// without a broker: envelope and JSON Schema validation, encoding, routing
// and headers. It is what separates PublishFabric from PublishTransport.
func BenchmarkEnvelopeMessage(b *testing.B) {
	reg, err := registry.Default()
	if err != nil {
		b.Fatal(err)
	}
	e := kibEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := broker.EnvelopeMessage(reg, e); err != nil {
			b.Fatal(err)
		}
	}
}
