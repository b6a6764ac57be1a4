package telemetry

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Propagator is the W3C trace-context propagator the fabric uses for
// traceparent/tracestate headers.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// HeaderCarrier adapts AMQP headers to a propagation.TextMapCarrier.
type HeaderCarrier amqp.Table

// Get implements propagation.TextMapCarrier.
func (c HeaderCarrier) Get(key string) string {
	if v, ok := c[key].(string); ok {
		return v
	}
	return ""
}

// Set implements propagation.TextMapCarrier.
func (c HeaderCarrier) Set(key, value string) { c[key] = value }

// Keys implements propagation.TextMapCarrier.
func (c HeaderCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// Metrics are the fabric's instruments. The consumer's and publisher's carry
// attributes consumer and type; the security signals (docs/runbooks.md) carry
// only bounded labels of their own, never a tenant, subject or id.
type Metrics struct {
	// Meter registers observable instruments (queue depth) per consumer.
	Meter     metric.Meter
	Processed metric.Int64Counter
	Failed    metric.Int64Counter
	Retried   metric.Int64Counter
	// OutageWaits counts calls again of a message kept through a
	// dependency's outage (fabric.ErrUnavailable), after a pause.
	OutageWaits  metric.Int64Counter
	DeadLettered metric.Int64Counter
	Duplicates   metric.Int64Counter
	Duration     metric.Float64Histogram
	Lag          metric.Float64Histogram
	BatchSize    metric.Int64Histogram
	// BatchRetried counts batches that ran together, met a failing
	// message and ran again one message per savepoint.
	BatchRetried metric.Int64Counter
	PaceWait     metric.Float64Histogram
	Throttled    metric.Int64Counter
	Published    metric.Int64Counter
	PublishFail  metric.Int64Counter

	// MassActionItems counts the items an operator's bulk action touched
	// (label action: dlq_replay, dlq_purge, history_replay, reaction_review).
	MassActionItems metric.Int64Counter
	// CrossTenant counts requests that named another tenant than their
	// token's (label surface). Envelopes of the wrong tenant are dead-letters
	// with a security reason (DeadLettered), not counted again here.
	CrossTenant metric.Int64Counter
	// AuthFailures counts requests answered 401 or 403 (label reason), and
	// RepeatedAuthFailures one principal passing the repeat limit of such
	// answers within a window (package internal/security).
	AuthFailures         metric.Int64Counter
	RepeatedAuthFailures metric.Int64Counter
	// CapabilityRefused counts calls refused because the caller lacks what
	// the route or action requires (label capability).
	CapabilityRefused metric.Int64Counter
}

// NewMetrics creates the instruments on mp (a no-op provider when nil).
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/agora-platform/agora/pkg/fabric")
	var err error
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, e)
		return c
	}
	out := &Metrics{
		Meter:        m,
		Processed:    counter("fabric.consumer.processed", "Messages handled successfully and acked."),
		Throttled:    counter("fabric.ratelimit.throttled", "Work refused over its rate limit (label limiter, tenant)."),
		Failed:       counter("fabric.consumer.failed", "Handler failures, by error class."),
		Retried:      counter("fabric.consumer.retried", "Messages sent to a retry tier."),
		OutageWaits:  counter("fabric.consumer.outage_waits", "Messages called again after a pause because a dependency was down (fabric.ErrUnavailable): kept in order, no retry tier."),
		DeadLettered: counter("fabric.consumer.dead_lettered", "Messages sent to the consumer's DLQ, by reason."),
		Duplicates:   counter("fabric.consumer.duplicates", "Messages skipped by the inbox as already processed."),
		BatchRetried: counter("fabric.consumer.batch_retried", "Batches rolled back at a failing message and run again one message per savepoint."),
		Published:    counter("fabric.publisher.confirmed", "Messages confirmed by the broker."),
		PublishFail:  counter("fabric.publisher.failed", "Publishes that were nacked, returned or lost."),

		MassActionItems: counter("fabric.operator.mass_action_items", "Items an operator's bulk action touched (letters replayed or purged, events replayed, requests a mass reaction reviewed), by action."),
		CrossTenant:     counter("fabric.security.cross_tenant", "Requests that named a tenant other than their credentials', by surface."),
		AuthFailures:    counter("fabric.security.authorization_failures", "Requests answered 401 or 403, by reason."),
		RepeatedAuthFailures: counter("fabric.security.repeated_authorization_failures",
			"Times one principal reached the repeat limit of 401/403 answers within the window, by reason of the last one."),
		CapabilityRefused: counter("fabric.security.capability_refused", "Calls refused because the caller lacks the role or right they need, by capability."),
	}
	out.Duration, err = m.Float64Histogram("fabric.consumer.duration", metric.WithUnit("s"),
		metric.WithDescription("Handler processing time."))
	errs = append(errs, err)
	out.Lag, err = m.Float64Histogram("fabric.consumer.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of a message when its consumer received it (publish to delivery)."))
	errs = append(errs, err)
	out.PaceWait, err = m.Float64Histogram("fabric.consumer.pace_wait", metric.WithUnit("s"),
		metric.WithDescription("Time a paced consumer's message waited for a token before its handler ran."))
	errs = append(errs, err)
	out.BatchSize, err = m.Int64Histogram("fabric.consumer.batch_size", metric.WithUnit("{message}"),
		metric.WithDescription("Messages a batch handler took at once (1 when the queue is quiet)."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64))
	errs = append(errs, err)
	for _, e := range errs {
		if e != nil {
			return nil, fmt.Errorf("telemetry: %w", e)
		}
	}
	return out, nil
}

// Attrs returns the standard attribute set for a consumer and message type.
func Attrs(consumer, typ string, extra ...attribute.KeyValue) metric.MeasurementOption {
	kv := append([]attribute.KeyValue{attribute.String("consumer", consumer), attribute.String("type", typ)}, extra...)
	return metric.WithAttributes(kv...)
}

// Prometheus returns a meter provider whose instruments are served by the
// returned handler in the Prometheus text format. Each call has its own
// registry, so tests and services never share state.
func Prometheus() (*sdkmetric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	return mp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
