package process

import (
	"context"
	"log/slog"
	"time"
)

// Sweep handles up to limit due timers (SLA breaches, stuck instances)
// and returns how many it handled.
type Sweep func(ctx context.Context, limit int) (int, error)

// Watch runs sweep every interval until ctx ends; a full batch is followed
// at once by another sweep, so a backlog drains without waiting for ticks.
// Errors are logged and the next tick retries. It returns when ctx is done.
// what names the sweep in the log ("sla", "watchdog").
func Watch(ctx context.Context, what string, sweep Sweep, interval time.Duration, batch int, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := sweep(ctx, batch)
			if err != nil {
				if ctx.Err() == nil {
					log.Error(what+" sweep failed", "err", err)
				}
				break
			}
			if n > 0 {
				log.Info(what+" sweep reported tasks", "tasks", n)
			}
			if n < batch {
				break
			}
		}
	}
}
