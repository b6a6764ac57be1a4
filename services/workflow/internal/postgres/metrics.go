package postgres

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// reactionMetrics count what the reactive fabric decides. Decisions are
// counted when recorded in the inbox transaction, before it commits: a
// rolled-back transaction (rare: the message is retried and decided
// again) counts twice.
type reactionMetrics struct {
	decisions metric.Int64Counter
	loops     metric.Int64Counter
	reviewed  metric.Int64Counter
}

func newReactionMetrics(meter metric.Meter) (reactionMetrics, error) {
	if meter == nil {
		meter = noop.NewMeterProvider().Meter("")
	}
	var m reactionMetrics
	for _, c := range []struct {
		dst        *metric.Int64Counter
		name, desc string
	}{
		{&m.decisions, "workflow.reaction.decisions", "Subscription decisions recorded, by outcome and status."},
		{&m.loops, "workflow.reaction.loops_stopped",
			"Reactions not run because what they emit would exceed the causation depth limit (a reaction loop)."},
		{&m.reviewed, "workflow.reaction.job_requests", "Requests a mass reaction's batches reviewed."},
	} {
		var err error
		if *c.dst, err = meter.Int64Counter(c.name, metric.WithDescription(c.desc)); err != nil {
			return m, fmt.Errorf("reaction metric %s: %w", c.name, err)
		}
	}
	return m, nil
}

func (m reactionMetrics) decided(ctx context.Context, outcome, status string) {
	m.decisions.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome), attribute.String("status", status)))
}
