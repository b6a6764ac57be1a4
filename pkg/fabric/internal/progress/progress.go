// Package progress reports how a long operation (a DLQ replay or purge, a
// backfill, a reindex) is going: how much is done of how much, at what
// rate, and when it should end.
package progress

import (
	"fmt"
	"time"
)

// Meter measures one operation from its start.
type Meter struct {
	what  string
	start time.Time
	now   func() time.Time
}

// Start returns a meter of an operation on items named what ("letters"),
// started now.
func Start(what string, now func() time.Time) *Meter {
	return &Meter{what: what, start: now(), now: now}
}

// Line describes done of total items: "120/500 letters, 40/s, ETA 9s".
// The rate and the estimate appear once something is done and time has
// passed; at the end the line gives the elapsed time instead.
func (m *Meter) Line(done, total int) string {
	elapsed := m.now().Sub(m.start)
	s := fmt.Sprintf("%d/%d %s", done, total, m.what)
	if done <= 0 || elapsed <= 0 {
		return s
	}
	rate := float64(done) / elapsed.Seconds()
	s += fmt.Sprintf(", %.0f/s", rate)
	if done >= total {
		return s + ", done in " + round(elapsed).String()
	}
	eta := time.Duration(float64(total-done) / rate * float64(time.Second))
	return s + ", ETA " + round(eta).String()
}

// round keeps a duration readable: whole seconds, or tenths below 10 s.
func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
