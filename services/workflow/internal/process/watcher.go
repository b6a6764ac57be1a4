package process

import (
	"context"
	"log/slog"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/sweep"
)

// Watch runs a sweep (SLA breaches, stuck instances, schedule slots,
// reaction jobs) until ctx ends, logging failures and what each sweep
// reported; what names it in the log ("sla", "watchdog"). It sweeps every
// interval while it finds work, and stretches the wait while it finds none
// up to idleWait(interval): an idle workflow service costs the database a
// query per sweep every few seconds instead of every second, and what falls
// due while it waits is handled at most that much late.
func Watch(ctx context.Context, what string, s sweep.Func, interval time.Duration, batch int, log *slog.Logger) {
	sweep.RunIdle(ctx, interval, idleWait(interval), nil, batch, s,
		func(err error) { log.Error(what+" sweep failed", "err", err) },
		func(n int) { log.Info(what+" sweep reported tasks", "tasks", n) })
}

// idleWait is the longest an idle sweep of the given interval waits: ten
// intervals, but no more than 15 s unless the interval itself is longer.
// The default 1 s sweeps wait up to 10 s; a test's 100 ms ones up to 1 s.
func idleWait(interval time.Duration) time.Duration {
	return max(interval, min(10*interval, 15*time.Second))
}
