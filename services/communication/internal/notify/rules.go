package notify

import (
	"fmt"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// QuietHours is a citizen's daily window, in their time zone, in which the
// channels that interrupt (SMS, WhatsApp) stay silent. A window may cross
// midnight (22:00–07:00).
type QuietHours struct {
	Start    string `json:"start"`    // "22:00"
	End      string `json:"end"`      // "07:00"
	TimeZone string `json:"timeZone"` // IANA, "America/Sao_Paulo"
}

const clockLayout = "15:04"

// Validate returns ErrInvalid (wrapped, naming the field) when q is not a
// window of two distinct times of day in a known zone.
func (q QuietHours) Validate() error {
	start, err1 := time.Parse(clockLayout, q.Start)
	end, err2 := time.Parse(clockLayout, q.End)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%w: quietHours start and end must be times of day like 22:00", ErrInvalid)
	}
	if start.Equal(end) {
		return fmt.Errorf("%w: quietHours start and end must differ", ErrInvalid)
	}
	if q.TimeZone == "" {
		return fmt.Errorf("%w: quietHours timeZone is required (IANA, like America/Sao_Paulo)", ErrInvalid)
	}
	if _, err := time.LoadLocation(q.TimeZone); err != nil {
		return fmt.Errorf("%w: quietHours timeZone %q is not a known zone", ErrInvalid, q.TimeZone)
	}
	return nil
}

// EndAfter returns the end of the quiet window that contains t, and true;
// or false when t is outside every window. q must be valid.
func (q QuietHours) EndAfter(t time.Time) (time.Time, bool) {
	loc, err := time.LoadLocation(q.TimeZone)
	if err != nil {
		return time.Time{}, false
	}
	start, _ := time.Parse(clockLayout, q.Start)
	end, _ := time.Parse(clockLayout, q.End)
	local := t.In(loc)
	at := func(day time.Time, c time.Time) time.Time {
		return time.Date(day.Year(), day.Month(), day.Day(), c.Hour(), c.Minute(), 0, 0, loc)
	}
	// The window that contains t began today or, crossing midnight,
	// yesterday.
	for _, day := range []time.Time{local.AddDate(0, 0, -1), local} {
		from, to := at(day, start), at(day, end)
		if !to.After(from) {
			to = at(day.AddDate(0, 0, 1), end)
		}
		if !local.Before(from) && local.Before(to) {
			return to.UTC(), true
		}
	}
	return time.Time{}, false
}

// Interrupts reports whether ch reaches the citizen's phone at once, so
// that quiet hours hold it back. E-mail waits in the inbox anyway.
func (ch Channel) Interrupts() bool { return ch == SMS || ch == WhatsApp }

// Verdict is what the rules say about one notice.
type Verdict int

// The three verdicts.
const (
	// Send it now.
	Send Verdict = iota
	// Withhold it for good: the citizen has not consented to it.
	Withhold
	// Hold it until the time Decide returns.
	Hold
)

// ReasonNoConsent is the failure reason of a withheld notification.
const ReasonNoConsent = "no-consent"

// Decide applies c's consent and quiet hours to a notice of template on ch
// at now. The confirmation of a submission answers the citizen's own act
// and needs no consent; progress notices need it. Any notice on an
// interrupting channel waits for the end of the quiet hours.
func Decide(c Contact, ch Channel, template string, now time.Time) (Verdict, time.Time) {
	if template != TemplateConfirmation && !c.WantsProgressNotices() {
		return Withhold, time.Time{}
	}
	if c.QuietHours != nil && ch.Interrupts() {
		if until, ok := c.QuietHours.EndAfter(now); ok {
			return Hold, until
		}
	}
	return Send, time.Time{}
}

// WantsProgressNotices reports the citizen's consent to notices about their
// requests' progress; it is given unless withdrawn.
func (c Contact) WantsProgressNotices() bool { return c.ProgressNotices == nil || *c.ProgressNotices }

// HeldNotice is a notification waiting for the end of quiet hours, with what
// sending it then needs: the template's parameters and the header of the
// message that asked for it, which the event announcing it derives from.
type HeldNotice struct {
	TenantID     string
	Notification Notification
	Params       map[string]string
	Cause        envelope.Envelope
}
