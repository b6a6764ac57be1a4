package fabric_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// BenchmarkStorm is seed 004 §36's storm: a producer offers BENCH_RATE
// events/s (default 10,000) for BENCH_SECONDS (default 60) through the
// fabric Publisher to one quorum queue whose consumer is paced by the
// fabric's own ConsumerOptions.Pace to BENCH_CONSUMER_RATE/s (default
// 1,000). The producer publishes directly (PublishAsync, confirms, the
// default window of 256): when the broker or the window cannot take an
// event when it is due, PublishAsync blocks, so the producer is held back,
// never refused. The benchmark waits until every event has been handled,
// then fails if any was lost, dead-lettered or not confirmed.
//
// Reported: the rate the producer achieved and how far behind its schedule
// the window held it, the peak queue depth (queue.declare passive, every
// second), the broker node's peak memory and whether its memory alarm was
// ever raised (management API /api/nodes), this process's peak RSS and Go
// heap (producer and consumer share it), the time from the last confirm
// to an empty queue and the consumer's rate while draining. The consumer's
// own exported gauges and lag histogram are read once a minute through an
// OTel reader, as Prometheus would scrape them; with BENCH_STORM_SERIES
// set to a path, they are written there as promtool input series, so the
// alert rules (deploy/observability/alerts.yml) can be evaluated on what
// this run exported.
//
// At the defaults the drain alone takes about ten minutes, once per b.N
// (a run is far longer than -benchtime, so b.N stays 1).
func BenchmarkStorm(b *testing.B) {
	cfg := stormConfig{
		rate:         envInt(b, "BENCH_RATE", 10000),
		seconds:      envInt(b, "BENCH_SECONDS", 60),
		consumerRate: envInt(b, "BENCH_CONSUMER_RATE", 1000),
		seriesPath:   os.Getenv("BENCH_STORM_SERIES"),
	}
	for range b.N {
		runStorm(b, cfg)
	}
}

type stormConfig struct {
	rate, seconds, consumerRate int
	seriesPath                  string
}

func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

// stormID is the UUIDv7 of event seq in this run: the run's millisecond
// clock in the time field and seq in the random bits, so the handler can
// count each event without a map of 600,000 strings (which would weigh on
// the memory this benchmark measures).
func stormID(runMs int64, seq int) string {
	return fmt.Sprintf("%08x-%04x-7000-8000-%012x", uint64(runMs)>>16, uint64(runMs)&0xffff, seq)
}

func stormSeq(id string) (int, bool) {
	if len(id) != 36 {
		return 0, false
	}
	n, err := strconv.ParseUint(id[24:], 16, 64)
	return int(n), err == nil
}

// stormSample is what the sampler saw at one second of the run.
type stormSample struct {
	at       time.Duration
	depth    int
	consumed int64
	memUsed  int64
	alarm    bool
	rss      int64
	heap     uint64
}

// minuteSeries is one OTel collection of the consumer's exported metrics.
type minuteSeries struct {
	depth, retry int64
	lagBounds    []float64
	lagCum       []uint64 // cumulative per bound, then +Inf
	lagSum       float64
}

func runStorm(b *testing.B, cfg stormConfig) {
	n := cfg.rate * cfg.seconds
	s := newStackB(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The consumer's metrics go to a reader collected once a minute, the
	// way a Prometheus scrape reads the exporter.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := telemetry.NewMetrics(mp)
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}

	seen := make([]atomic.Uint32, n)
	var consumed, distinct, foreign atomic.Int64
	allIn := make(chan struct{})
	var allOnce sync.Once
	handler := func(_ context.Context, e envelope.Envelope) error {
		consumed.Add(1)
		seq, ok := stormSeq(e.ID)
		if !ok || seq >= n {
			foreign.Add(1)
			return nil
		}
		if seen[seq].Add(1) == 1 && distinct.Add(1) == int64(n) {
			allOnce.Do(func() { close(allIn) })
		}
		return nil
	}
	// The limit is the fabric's pacing (package ratelimit), not a sleep in
	// the handler: messages wait in the queue and the prefetch window.
	stopConsumer := s.Run(b, s.spec, handler, fabric.ConsumerOptions{
		Pace: ratelimit.NewLocal(float64(cfg.consumerRate), 1), Metrics: metrics,
	})

	// The sampler: queue depth on its own channel, the broker node's memory
	// through the management API, this process's memory from /proc and the
	// runtime, once a second; the consumer's metrics once a minute.
	ch, err := s.Conn.Channel(ctx)
	if err != nil {
		b.Fatalf("sampler channel: %v", err)
	}
	defer ch.Close()
	start := time.Now()
	var (
		mu      sync.Mutex
		samples []stormSample
		minutes []minuteSeries
		sampErr error
	)
	sampDone := make(chan struct{})
	stopSampler := make(chan struct{})
	go func() {
		defer close(sampDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		nextMinute := time.Duration(0)
		for {
			at := time.Since(start)
			smp, err := sampleStorm(s, ch, at)
			if at >= nextMinute {
				ms, merr := collectMinute(ctx, reader)
				if merr != nil && err == nil {
					err = merr
				}
				mu.Lock()
				minutes = append(minutes, ms)
				mu.Unlock()
				nextMinute += time.Minute
			}
			smp.consumed = consumed.Load()
			mu.Lock()
			samples = append(samples, smp)
			if err != nil && sampErr == nil {
				sampErr = err
			}
			mu.Unlock()
			select {
			case <-tick.C:
			case <-stopSampler:
				return
			}
		}
	}()

	// The producer: event i is due at start + i/rate. It sleeps only when
	// it is ahead of its schedule; when PublishAsync blocks (the window of
	// unconfirmed messages is full, or the broker has blocked the
	// connection) it falls behind, and lateness is what the backpressure
	// cost it.
	tmpl := submitted(b, "org-a", "storm")
	runMs := time.Now().UnixMilli()
	pending := make(chan *broker.Pending, 1024)
	var confirmed atomic.Int64
	confirmErr := make(chan error, 1)
	go func() {
		defer close(confirmErr)
		for pd := range pending {
			if err := pd.Wait(ctx); err != nil {
				confirmErr <- fmt.Errorf("confirm: %w", err)
				cancel()
				for range pending {
				}
				return
			}
			confirmed.Add(1)
		}
	}()
	interval := time.Second / time.Duration(cfg.rate)
	var inPublish, maxBehind time.Duration
	pubStart := time.Now()
	for i := range n {
		due := pubStart.Add(time.Duration(i) * interval)
		now := time.Now()
		if ahead := due.Sub(now); ahead > time.Millisecond {
			time.Sleep(ahead)
		} else if behind := now.Sub(due); behind > maxBehind {
			maxBehind = behind
		}
		e := tmpl
		e.ID = stormID(runMs, i)
		e.OccurredAt = time.Now().UTC()
		t0 := time.Now()
		pd, err := s.Pub.PublishAsync(ctx, e)
		inPublish += time.Since(t0)
		if err != nil {
			close(pending)
			if cerr := <-confirmErr; cerr != nil {
				b.Fatalf("producer: %v", cerr)
			}
			b.Fatalf("publish event %d of %d: %v", i, n, err)
		}
		pending <- pd
	}
	sent := time.Since(pubStart)
	close(pending)
	if err := <-confirmErr; err != nil {
		b.Fatalf("producer: %v", err)
	}
	confirmedAt := time.Since(pubStart)
	consumedAtConfirm := consumed.Load()
	behind := sent - time.Duration(cfg.seconds)*time.Second

	// The drain: wait for the positive signal, every event handled, with a
	// generous bound of twice the time the consumer's pace needs.
	bound := 2*time.Duration(n/cfg.consumerRate)*time.Second + 2*time.Minute
	select {
	case <-allIn:
	case <-time.After(bound):
		b.Fatalf("after %s, %d of %d events handled (%d deliveries): lost", bound, distinct.Load(), n, consumed.Load())
	}
	drained := time.Since(pubStart)
	close(stopSampler)
	<-sampDone
	stopConsumer()

	if dlq := s.Drain(b, s.spec.DLQ()); len(dlq) > 0 {
		b.Fatalf("%d events were dead-lettered", len(dlq))
	}
	if d := s.Depth(b, s.spec.Queue); d != 0 {
		b.Fatalf("%d messages still in %s after every event was handled", d, s.spec.Queue)
	}
	var dup int64
	for i := range seen {
		if c := seen[i].Load(); c > 1 {
			dup += int64(c - 1)
		}
	}
	if f := foreign.Load(); f > 0 {
		b.Fatalf("%d deliveries were not this run's events", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if sampErr != nil {
		b.Fatalf("sampler: %v", sampErr)
	}

	var peakDepth int
	var peakDepthAt time.Duration
	var peakMem, memLimit, peakRSS int64
	var peakHeap uint64
	alarms := 0
	for _, smp := range samples {
		if smp.depth > peakDepth {
			peakDepth, peakDepthAt = smp.depth, smp.at
		}
		peakMem = max(peakMem, smp.memUsed)
		peakRSS = max(peakRSS, smp.rss)
		peakHeap = max(peakHeap, smp.heap)
		if smp.alarm {
			alarms++
		}
	}
	memLimit = brokerMemLimit(s)
	drain := drained - confirmedAt
	drainRate := float64(int64(n)-consumedAtConfirm) / drain.Seconds()
	achieved := float64(n) / sent.Seconds()

	b.Logf("storm: offered %d events/s for %d s (%d events) to a consumer paced at %d/s", cfg.rate, cfg.seconds, n, cfg.consumerRate)
	b.Logf("producer: sent in %.1f s (%.0f events/s achieved), last confirm at %.1f s; %.1f s behind its schedule at the end (at most %.1f s); %.1f s inside PublishAsync",
		sent.Seconds(), achieved, confirmedAt.Seconds(), behind.Seconds(), maxBehind.Seconds(), inPublish.Seconds())
	b.Logf("queue: peak depth %d at %.0f s; broker node memory peak %.0f MiB of a %.0f MiB watermark, alarm raised in %d of %d samples",
		peakDepth, peakDepthAt.Seconds(), mib(peakMem), mib(memLimit), alarms, len(samples))
	b.Logf("process (producer and consumer): peak RSS %.0f MiB, peak Go heap in use %.0f MiB", mib(peakRSS), mib(int64(peakHeap)))
	b.Logf("drain: %d events left at the last confirm, queue empty and all handled %.1f s later (%.0f events/s); %d events handled, %d deliveries, %d duplicates, %d lost",
		int64(n)-consumedAtConfirm, drain.Seconds(), drainRate, distinct.Load(), consumed.Load(), dup, int64(n)-distinct.Load())
	for _, smp := range samples {
		if int(smp.at.Seconds())%30 == 0 || smp.at > drained-time.Second {
			b.Logf("  t=%4.0fs depth %7d handled %7d broker mem %5.0f MiB alarm %v rss %4.0f MiB heap %4.0f MiB",
				smp.at.Seconds(), smp.depth, smp.consumed, mib(smp.memUsed), smp.alarm, mib(smp.rss), mib(int64(smp.heap)))
		}
	}
	if cfg.seriesPath != "" {
		if err := writeSeries(cfg.seriesPath, s.spec.Queue, minutes); err != nil {
			b.Fatalf("series: %v", err)
		}
		b.Logf("the consumer's exported metrics, once a minute: %s", cfg.seriesPath)
	}

	b.ReportMetric(achieved, "sent_events/s")
	b.ReportMetric(behind.Seconds(), "behind_schedule_s")
	b.ReportMetric(float64(peakDepth), "peak_depth")
	b.ReportMetric(mib(peakMem), "broker_peak_MiB")
	b.ReportMetric(float64(alarms), "mem_alarm_samples")
	b.ReportMetric(mib(peakRSS), "process_peak_rss_MiB")
	b.ReportMetric(drain.Seconds(), "drain_s")
	b.ReportMetric(drainRate, "drain_events/s")
	b.ReportMetric(float64(dup), "duplicates")
	b.ReportMetric(float64(int64(n)-distinct.Load()), "lost")
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

// nodeInfo is the part of the management API's node object the storm reads.
type nodeInfo struct {
	MemUsed  int64 `json:"mem_used"`
	MemLimit int64 `json:"mem_limit"`
	MemAlarm bool  `json:"mem_alarm"`
}

func sampleStorm(s *stack, ch *amqp.Channel, at time.Duration) (stormSample, error) {
	smp := stormSample{at: at}
	q, err := ch.QueueDeclarePassive(s.spec.Queue, true, false, false, false, nil)
	if err != nil {
		return smp, fmt.Errorf("depth of %s: %w", s.spec.Queue, err)
	}
	smp.depth = q.Messages
	var nodes []nodeInfo
	if err := s.Vhost.Mgmt("GET", "/api/nodes", nil, &nodes); err != nil {
		return smp, fmt.Errorf("broker node memory: %w", err)
	}
	for _, nd := range nodes {
		smp.memUsed += nd.MemUsed
		smp.alarm = smp.alarm || nd.MemAlarm
	}
	smp.rss = procRSS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	smp.heap = ms.HeapInuse
	return smp, nil
}

func brokerMemLimit(s *stack) int64 {
	var nodes []nodeInfo
	if err := s.Vhost.Mgmt("GET", "/api/nodes", nil, &nodes); err != nil || len(nodes) == 0 {
		return 0
	}
	return nodes[0].MemLimit
}

// procRSS is this process's resident set (VmRSS), 0 where /proc is absent.
func procRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// collectMinute reads the consumer's queue and retry depth gauges and its
// lag histogram as the OTel exporter would hand them to Prometheus.
func collectMinute(ctx context.Context, r *sdkmetric.ManualReader) (minuteSeries, error) {
	var rm metricdata.ResourceMetrics
	var out minuteSeries
	if err := r.Collect(ctx, &rm); err != nil {
		return out, fmt.Errorf("collect metrics: %w", err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					switch m.Name {
					case "fabric.consumer.queue_depth":
						out.depth = p.Value
					case "fabric.consumer.retry_depth":
						out.retry = p.Value
					}
				}
			case metricdata.Histogram[float64]:
				if m.Name != "fabric.consumer.lag" {
					continue
				}
				// One series per message type; the storm has one type.
				for _, p := range d.DataPoints {
					out.lagBounds = p.Bounds
					var cum uint64
					out.lagCum = out.lagCum[:0]
					for _, c := range p.BucketCounts {
						cum += c
						out.lagCum = append(out.lagCum, cum)
					}
					out.lagSum = p.Sum
				}
			}
		}
	}
	return out, nil
}

// writeSeries writes the minutes as promtool input_series (interval 1m),
// named as the Prometheus exporter names them.
func writeSeries(path, consumer string, minutes []minuteSeries) error {
	var sb strings.Builder
	vals := func(f func(minuteSeries) string) string {
		var parts []string
		for _, m := range minutes {
			parts = append(parts, f(m))
		}
		return strings.Join(parts, " ")
	}
	lbl := fmt.Sprintf(`job="agora-services", consumer=%q`, consumer)
	fmt.Fprintf(&sb, "      - series: 'fabric_consumer_queue_depth{%s}'\n        values: '%s'\n", lbl,
		vals(func(m minuteSeries) string { return strconv.FormatInt(m.depth, 10) }))
	fmt.Fprintf(&sb, "      - series: 'fabric_consumer_retry_depth{%s}'\n        values: '%s'\n", lbl,
		vals(func(m minuteSeries) string { return strconv.FormatInt(m.retry, 10) }))
	var bounds []float64
	for _, m := range minutes {
		if len(m.lagBounds) > 0 {
			bounds = m.lagBounds
		}
	}
	sort.Float64s(bounds)
	les := make([]string, 0, len(bounds)+1)
	for _, bd := range bounds {
		les = append(les, strconv.FormatFloat(bd, 'g', -1, 64))
	}
	les = append(les, "+Inf")
	for i, le := range les {
		fmt.Fprintf(&sb, "      - series: 'fabric_consumer_lag_seconds_bucket{%s, type=\"request.submitted.v1\", le=%q}'\n        values: '%s'\n", lbl, le,
			vals(func(m minuteSeries) string {
				if i < len(m.lagCum) {
					return strconv.FormatUint(m.lagCum[i], 10)
				}
				return "0"
			}))
	}
	fmt.Fprintf(&sb, "      - series: 'fabric_consumer_lag_seconds_count{%s, type=\"request.submitted.v1\"}'\n        values: '%s'\n", lbl,
		vals(func(m minuteSeries) string {
			if len(m.lagCum) == 0 {
				return "0"
			}
			return strconv.FormatUint(m.lagCum[len(m.lagCum)-1], 10)
		}))
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}
