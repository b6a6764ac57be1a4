package process

import (
	"context"
	"log/slog"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/sweep"
)

// Watch runs a sweep (SLA breaches, stuck instances, schedule slots)
// every interval until ctx ends, logging failures and what each sweep
// reported; what names it in the log ("sla", "watchdog").
func Watch(ctx context.Context, what string, s sweep.Func, interval time.Duration, batch int, log *slog.Logger) {
	sweep.Run(ctx, interval, batch, s,
		func(err error) { log.Error(what+" sweep failed", "err", err) },
		func(n int) { log.Info(what+" sweep reported tasks", "tasks", n) })
}
