package process

import (
	"context"
	"log/slog"
	"time"
)

// Sweeper marks overdue tasks as breached.
type Sweeper interface {
	// SweepSLA handles up to limit overdue tasks and returns how many.
	SweepSLA(ctx context.Context, limit int) (int, error)
}

// WatchSLA sweeps every interval until ctx ends; a full batch is followed
// at once by another sweep, so a backlog drains without waiting for ticks.
// Errors are logged and the next tick retries. It returns when ctx is done.
func WatchSLA(ctx context.Context, s Sweeper, interval time.Duration, batch int, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := s.SweepSLA(ctx, batch)
			if err != nil {
				if ctx.Err() == nil {
					log.Error("sla sweep failed", "err", err)
				}
				break
			}
			if n > 0 {
				log.Info("sla breaches recorded", "tasks", n)
			}
			if n < batch {
				break
			}
		}
	}
}
