package observability

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/retention"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var (
	fabricOnce  sync.Once
	fabricNames map[string]bool
	fabricErr   error
)

// FabricMetrics returns the series names of every instrument pkg/fabric registers
// on a service's meter (telemetry.NewMetrics, a consumer's queue-depth gauge,
// retention's counter), as a service's /metrics shows them once each has been
// observed. The instruments are created the way pkg/fabric/host creates them, on
// the same OTel Prometheus exporter, and each is then observed once, so the names
// are the exporter's own (suffixes, units), never spelled out here. Instruments a
// service registers itself (datalake.orphans_removed) are not included.
func FabricMetrics() (map[string]bool, error) {
	fabricOnce.Do(func() { fabricNames, fabricErr = fabricMetrics() })
	if fabricErr != nil {
		return nil, fabricErr
	}
	out := make(map[string]bool, len(fabricNames))
	for n := range fabricNames {
		out[n] = true
	}
	return out, nil
}

func fabricMetrics() (map[string]bool, error) {
	mp, handler, err := telemetry.Prometheus()
	if err != nil {
		return nil, err
	}
	defer mp.Shutdown(context.Background())
	rec := &recorder{MeterProvider: mp}
	m, err := telemetry.NewMetrics(rec)
	if err != nil {
		return nil, err
	}
	// A consumer registers its gauge when it is built; it is never run here, so it
	// needs a connection and a publisher only to pass the constructor's checks.
	reg, err := registry.Default()
	if err != nil {
		return nil, fmt.Errorf("observability: registry: %w", err)
	}
	if _, err := broker.NewConsumer(&broker.Conn{}, &broker.Publisher{}, reg, topology.Consumer{Queue: "catalog"},
		func(context.Context, envelope.Envelope) error { return nil }, fabric.ConsumerOptions{Metrics: m}); err != nil {
		return nil, fmt.Errorf("observability: consumer: %w", err)
	}
	// host passes its Metrics.Meter to retention, as here; the pool is used only by Run.
	if _, err := retention.New(nil, "catalog", nil, retention.Options{Meter: m.Meter}); err != nil {
		return nil, fmt.Errorf("observability: retention: %w", err)
	}
	rec.observeAll()
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	names, err := ParseExposition(w.Body)
	if err != nil {
		return nil, err
	}
	// The exporter's own series, not an instrument of the fabric.
	delete(names, "target_info")
	return names, nil
}

// recorder is a MeterProvider that remembers every synchronous instrument created
// through it, so that each can be observed once. Observable instruments report
// through their callbacks on every collection.
type recorder struct {
	metric.MeterProvider
	mu       sync.Mutex
	observes []func(context.Context)
}

func (r *recorder) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return &recordingMeter{Meter: r.MeterProvider.Meter(name, opts...), rec: r}
}

func (r *recorder) add(f func(context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observes = append(r.observes, f)
}

func (r *recorder) observeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.observes {
		f(context.Background())
	}
}

type recordingMeter struct {
	metric.Meter
	rec *recorder
}

func (m *recordingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	i, err := m.Meter.Int64Counter(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Add(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	i, err := m.Meter.Int64UpDownCounter(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Add(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	i, err := m.Meter.Int64Histogram(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Record(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Int64Gauge(name string, opts ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	i, err := m.Meter.Int64Gauge(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Record(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Float64Counter(name string, opts ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	i, err := m.Meter.Float64Counter(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Add(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Float64UpDownCounter(name string, opts ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	i, err := m.Meter.Float64UpDownCounter(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Add(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	i, err := m.Meter.Float64Histogram(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Record(ctx, 1) })
	}
	return i, err
}

func (m *recordingMeter) Float64Gauge(name string, opts ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	i, err := m.Meter.Float64Gauge(name, opts...)
	if err == nil {
		m.rec.add(func(ctx context.Context) { i.Record(ctx, 1) })
	}
	return i, err
}
