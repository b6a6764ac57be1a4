// Package schedule is a tenant's scheduled events (seed 004 §56-57): a cron
// expression in a time zone fires workflow.schedule-fired.v1 at each slot,
// exactly once across competing instances (the store records each slot
// under a primary key in the transaction that enqueues its event), and a
// catch-up policy decides what happens to the slots missed while no
// instance ran. This package is the pure part: parsing and which slots are
// due.
package schedule

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/agora-platform/agora/pkg/fabric"
)

// CatchUp is what happens to slots missed while no instance ran.
type CatchUp string

const (
	// CatchUpLatest fires the newest missed slot and skips the others
	// (the default: a daily report runs once after an outage, not once
	// per missed day).
	CatchUpLatest CatchUp = "latest"
	// CatchUpAll fires every missed slot, at most MaxCatchUp of them (the
	// newest); older ones are skipped.
	CatchUpAll CatchUp = "all"
	// CatchUpNone fires a slot only within Grace of its time; later ones
	// are skipped.
	CatchUpNone CatchUp = "none"
)

// Grace is how late a slot may fire under CatchUpNone (a sweep runs every
// few seconds, so an on-time slot is always within it).
const Grace = time.Minute

// MaxCatchUpLimit bounds MaxCatchUp: a schedule never floods the fabric
// after a long outage.
const MaxCatchUpLimit = 1000

// Spec is a schedule as a tenant writes it.
type Spec struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron"`
	TimeZone   string          `json:"timeZone"`
	CatchUp    CatchUp         `json:"catchUp"`
	MaxCatchUp int             `json:"maxCatchUp"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	// Query, when set, makes each slot fire one event per entity the
	// declared query selects instead of one event.
	Query *Query `json:"query,omitempty"`
}

// parser takes the standard five fields, an optional leading seconds field
// and descriptors (@hourly, @every 5m).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// maxPayload bounds a schedule's payload (it rides in every event).
const maxPayload = 8 << 10

// ErrInvalid is a schedule Check refuses; the message names the field.
var ErrInvalid = fmt.Errorf("%w schedule", fabric.ErrInvalid)

// ErrExists: the tenant already has a schedule of that name.
var ErrExists = fmt.Errorf("%w: the tenant already has a schedule of that name", fabric.ErrConflict)

// ErrNotFound: no such enabled schedule in the tenant.
var ErrNotFound = fmt.Errorf("%w: no such enabled schedule", fabric.ErrNotFound)

// Schedule is a stored schedule as the API shows it.
type Schedule struct {
	ID string `json:"id"`
	Spec
	Enabled    bool       `json:"enabled"`
	CreatedBy  string     `json:"createdBy"`
	CreatedAt  time.Time  `json:"createdAt"`
	DisabledAt *time.Time `json:"disabledAt,omitempty"`
	// NextAt is the next slot to fire (the oldest unfired one after an
	// outage); absent once disabled.
	NextAt *time.Time `json:"nextAt,omitempty"`
	// Fired are the latest fired slots, newest first (at most 5).
	Fired []Slot `json:"fired"`
}

// Slot is one fired slot.
type Slot struct {
	At time.Time `json:"at"`
	// EventID is the slot's event; a query's slot has one event per
	// selected entity and none here.
	EventID string    `json:"eventId,omitempty"`
	FiredAt time.Time `json:"firedAt"`
	// Selected is how many entities a query's slot selected (and fired
	// an event for); Truncated, that the query matched more than
	// MaxSelected and only the first were selected.
	Selected  *int `json:"selected,omitempty"`
	Truncated bool `json:"truncated,omitempty"`
}

// Check validates s and fills its defaults (UTC, latest, 10), returning
// the parsed schedule and its location.
func (s *Spec) Check() (cron.Schedule, *time.Location, error) {
	bad := func(format string, args ...any) (cron.Schedule, *time.Location, error) {
		return nil, nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" || len(s.Name) > 100 {
		return bad("name: 1 to 100 characters")
	}
	if strings.HasPrefix(strings.TrimSpace(s.Cron), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(s.Cron), "TZ=") {
		return bad("cron: give the time zone in timeZone, not in the expression")
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return bad("timeZone %q: %v", s.TimeZone, err)
	}
	sched, err := parser.Parse(s.Cron)
	if err != nil {
		return bad("cron %q: %v", s.Cron, err)
	}
	switch s.CatchUp {
	case "":
		s.CatchUp = CatchUpLatest
	case CatchUpLatest, CatchUpAll, CatchUpNone:
	default:
		return bad("catchUp %q: want latest, all or none", s.CatchUp)
	}
	if s.MaxCatchUp == 0 {
		s.MaxCatchUp = 10
	}
	if s.MaxCatchUp < 1 || s.MaxCatchUp > MaxCatchUpLimit {
		return bad("maxCatchUp %d: want 1 to %d", s.MaxCatchUp, MaxCatchUpLimit)
	}
	if len(s.Payload) == 0 {
		s.Payload = json.RawMessage(`{}`)
	}
	var obj map[string]any
	if len(s.Payload) > maxPayload || json.Unmarshal(s.Payload, &obj) != nil || obj == nil {
		return bad("payload: a JSON object of at most %d bytes", maxPayload)
	}
	if s.Query != nil {
		if _, err := s.Query.Check(); err != nil {
			return nil, nil, err
		}
	}
	return sched, loc, nil
}

// Next is sched's first slot strictly after t, in loc.
func Next(sched cron.Schedule, loc *time.Location, t time.Time) time.Time {
	return sched.Next(t.In(loc)).UTC()
}

// Plan is what one sweep does for a schedule whose next slot (next) is
// due at now.
type Plan struct {
	Fire    []time.Time // slots to fire, oldest first
	Skipped int         // missed slots the policy drops
	// Truncated: more than maxWalk slots were missed; those beyond were
	// skipped without being counted.
	Truncated bool
	Next      time.Time // the first slot after now: the timer's new due time
}

// maxWalk bounds how many slots one sweep walks: a schedule every second
// that was down for a month is not walked slot by slot.
const maxWalk = 100_000

// Due plans the slots from next (the oldest unfired one) up to now.
func Due(sched cron.Schedule, loc *time.Location, next, now time.Time, policy CatchUp, maxCatchUp int) Plan {
	var slots []time.Time
	t := next
	for !t.After(now) && len(slots) < maxWalk {
		slots = append(slots, t)
		t = Next(sched, loc, t)
	}
	p := Plan{Next: t}
	if !t.After(now) {
		p.Truncated, p.Next = true, Next(sched, loc, now)
	}
	if len(slots) == 0 {
		return p
	}
	var keep int
	switch policy {
	case CatchUpAll:
		keep = min(len(slots), maxCatchUp)
	case CatchUpNone:
		if now.Sub(slots[len(slots)-1]) <= Grace {
			keep = 1
		}
	default: // CatchUpLatest
		keep = 1
	}
	p.Fire = slots[len(slots)-keep:]
	p.Skipped = len(slots) - keep
	return p
}
