package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/telemetry"
)

// limiter takes a token for key if one is available now, or says how long
// until one is (ratelimit.PerKey: a bucket per key, shared by every
// instance).
type limiter interface {
	Allow(ctx context.Context, key string) (ok bool, wait time.Duration, err error)
}

// Limit is a publish limit (seed 004 §82): Key names the bucket an
// envelope draws from, "" for an envelope the limit does not cover.
type Limit struct {
	Name    string // what it limits by ("type", "producer"): the metric's limiter label
	Key     func(envelope.Envelope) string
	Limiter limiter
}

// errThrottled: an envelope is over a publish limit.
var errThrottled = errors.New("over its publish limit")

// throttledError names the limit an envelope is over. Enqueue returns it
// marked transient (fabric.Transient): a consumer's handler that enqueues
// is retried after its retry tier, and an HTTP handler answers 429 with
// Retry-After (problem.Fail reads Throttled).
type throttledError struct {
	Limit, Key string
	RetryAfter time.Duration
}

func (e *throttledError) Error() string {
	return fmt.Sprintf("outbox: %s %s is %v; retry in %s", e.Limit, e.Key, errThrottled, e.RetryAfter.Round(time.Millisecond))
}

func (e *throttledError) Unwrap() error { return errThrottled }

// Throttled says how long until the limit admits the envelope.
func (e *throttledError) Throttled() time.Duration { return e.RetryAfter }

// WithLimits returns an Outbox whose Enqueue first draws a token from each
// limit that covers each item (m, if set, counts refusals in
// fabric.ratelimit.throttled). An item over a limit fails the whole
// Enqueue, before anything is written: the producer decides (an HTTP
// caller gets 429, a consumer retries later). Tokens drawn for the items
// before it are not given back.
func (o *Outbox) WithLimits(m *telemetry.Metrics, limits ...Limit) *Outbox {
	out := *o // keeps the codec (WithCodec)
	out.limits, out.metrics = limits, m
	return &out
}

func (o *Outbox) admit(ctx context.Context, items []Item) error {
	for _, it := range items {
		for _, l := range o.limits {
			key := l.Key(it.Envelope)
			if key == "" {
				continue
			}
			ok, wait, err := l.Limiter.Allow(ctx, key)
			if err != nil {
				return fmt.Errorf("outbox: publish limit by %s: %w", l.Name, err)
			}
			if !ok {
				if o.metrics != nil {
					o.metrics.Throttled.Add(ctx, 1, metric.WithAttributes(attribute.String("limiter", "publish-"+l.Name),
						attribute.String("tenant", it.Envelope.TenantID)))
				}
				return fabric.Transient(&throttledError{Limit: l.Name, Key: key, RetryAfter: wait})
			}
		}
	}
	return nil
}
