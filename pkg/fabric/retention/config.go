package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults, chosen so a row outlives every way it can still be needed:
// inbox claims outlast retry tiers and any DLQ replay an operator would
// still make (a claim deleted too early lets a replayed duplicate run its
// effect again), published outbox rows stay a week for investigation, and
// DLQ audit rows a year.
const (
	defaultInterval = time.Hour
	defaultInbox    = 720 * time.Hour
	defaultOutbox   = 168 * time.Hour
	defaultDLQAudit = 8760 * time.Hour
	// A dead letter waits a month for an operator; then it is archived to
	// the data lake and removed (host: dlq archive), so no DLQ grows for
	// ever. The inbox keeps its claims as long, so a letter replayed
	// before then still meets its claim.
	defaultDLQ   = 720 * time.Hour
	defaultBatch = 1000
)

// Config is what every service reads from the environment
// (docs/architecture.md, "Configuration"). An age of 0 keeps that table's
// rows for ever; an Interval of 0 turns retention off.
type Config struct {
	Interval time.Duration // RETENTION_INTERVAL: time between runs
	Inbox    time.Duration // RETENTION_INBOX: processed inbox claims
	Outbox   time.Duration // RETENTION_OUTBOX: published outbox rows
	DLQAudit time.Duration // RETENTION_DLQ_AUDIT: DLQ audit rows
	DLQ      time.Duration // RETENTION_DLQ: dead letters, archived to the data lake then removed
	Batch    int           // RETENTION_BATCH: most rows one DELETE removes
}

// ConfigFrom reads the RETENTION_* variables through getenv. A value that
// is neither a positive duration nor "off" is an error naming the
// variable, so a typo stops the service at start-up instead of silently
// keeping (or deleting) data.
func ConfigFrom(getenv func(string) string) (Config, error) {
	c := Config{Batch: defaultBatch}
	var err error
	for _, v := range []struct {
		name string
		def  time.Duration
		dst  *time.Duration
	}{
		{"RETENTION_INTERVAL", defaultInterval, &c.Interval},
		{"RETENTION_INBOX", defaultInbox, &c.Inbox},
		{"RETENTION_OUTBOX", defaultOutbox, &c.Outbox},
		{"RETENTION_DLQ_AUDIT", defaultDLQAudit, &c.DLQAudit},
		{"RETENTION_DLQ", defaultDLQ, &c.DLQ},
	} {
		if *v.dst, err = Age(getenv, v.name, v.def); err != nil {
			return Config{}, err
		}
	}
	if s := strings.TrimSpace(getenv("RETENTION_BATCH")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 100000 {
			return Config{}, fmt.Errorf("RETENTION_BATCH: %q is not a number of rows between 1 and 100000", s)
		}
		c.Batch = n
	}
	return c, nil
}

// Age reads the duration variable name through getenv: def when unset, 0
// for "off" (or "0": keep for ever, or for RETENTION_INTERVAL, never run),
// else a positive Go duration ("48h", "90m"). Services read the ages of
// the tables they register with it (RETENTION_IDEMPOTENCY).
func Age(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	s := strings.TrimSpace(getenv(name))
	switch strings.ToLower(s) {
	case "":
		return def, nil
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration such as 48h or 90m, nor off", name, s)
	}
	return d, nil
}
