// Package projection is the analytics domain: requests counted by tenant,
// day of submission, service, channel and current status, and the report
// the query API returns. It knows nothing of databases or brokers.
package projection

import (
	"fmt"
	"sort"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
)

// ErrInvalid: a query or event breaks a rule (bad dates, from after to…);
// of the fabric's kind.
var ErrInvalid = fmt.Errorf("%w", fabric.ErrInvalid)

// StatusSubmitted is where every request starts.
const StatusSubmitted = "submitted"

// DateLayout is the day format of the API and the projection.
const DateLayout = "2006-01-02"

// MaxRangeDays bounds one report so a query stays cheap.
const MaxRangeDays = 366

// State is where one request is counted.
type State struct {
	RequestID string
	Day       time.Time // UTC midnight of the submission day
	ServiceID string
	Channel   string
	Status    string
	ChangedAt time.Time
}

// Delta adds N to the cell of (Day, ServiceID, Channel, Status).
type Delta struct {
	Day       time.Time
	ServiceID string
	Channel   string
	Status    string
	N         int64
}

// Submitted returns the state of a newly submitted request and the count
// it adds.
func Submitted(requestID, serviceID, channel string, submittedAt time.Time) (State, []Delta) {
	s := State{RequestID: requestID, Day: DayOf(submittedAt), ServiceID: serviceID, Channel: channel,
		Status: StatusSubmitted, ChangedAt: submittedAt}
	return s, []Delta{{Day: s.Day, ServiceID: serviceID, Channel: channel, Status: StatusSubmitted, N: 1}}
}

// Change moves s to status at changedAt. It returns the new state and the
// deltas, or ok=false when there is nothing to do: the status is the same,
// or the change is older than the one already applied (events of one
// request can be handled out of order by concurrent consumers).
func Change(s State, status string, changedAt time.Time) (next State, deltas []Delta, ok bool) {
	if status == s.Status || changedAt.Before(s.ChangedAt) {
		return s, nil, false
	}
	next = s
	next.Status, next.ChangedAt = status, changedAt
	return next, []Delta{
		{Day: s.Day, ServiceID: s.ServiceID, Channel: s.Channel, Status: s.Status, N: -1},
		{Day: s.Day, ServiceID: s.ServiceID, Channel: s.Channel, Status: status, N: 1},
	}, true
}

// DayOf returns the UTC day of t.
func DayOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Range is an inclusive range of days.
type Range struct {
	From, To time.Time
}

// ParseRange reads from and to (YYYY-MM-DD, both required). It returns
// ErrInvalid (wrapped, saying why) for bad dates, from after to, or a range
// longer than MaxRangeDays.
func ParseRange(from, to string) (Range, error) {
	f, err := time.Parse(DateLayout, from)
	if err != nil {
		return Range{}, fmt.Errorf("%w: from=%q is not a date (YYYY-MM-DD)", ErrInvalid, from)
	}
	t, err := time.Parse(DateLayout, to)
	if err != nil {
		return Range{}, fmt.Errorf("%w: to=%q is not a date (YYYY-MM-DD)", ErrInvalid, to)
	}
	if f.After(t) {
		return Range{}, fmt.Errorf("%w: from %s is after to %s", ErrInvalid, from, to)
	}
	if days := int(t.Sub(f).Hours()/24) + 1; days > MaxRangeDays {
		return Range{}, fmt.Errorf("%w: %d days asked, at most %d", ErrInvalid, days, MaxRangeDays)
	}
	return Range{From: f, To: t}, nil
}

// Row is one cell of the projection.
type Row struct {
	Day       string `json:"day"`
	ServiceID string `json:"serviceId"`
	Channel   string `json:"channel"`
	Status    string `json:"status"`
	Count     int64  `json:"count"`
}

// Totals sum the rows of a report.
type Totals struct {
	Requests  int64            `json:"requests"`
	ByStatus  map[string]int64 `json:"byStatus"`
	ByService map[string]int64 `json:"byService"`
	ByChannel map[string]int64 `json:"byChannel"`
}

// Report is the answer of the query API.
type Report struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Rows   []Row  `json:"rows"`
	Totals Totals `json:"totals"`
}

// NewReport sums rows (each request is in exactly one status, so the sum
// of all cells is the number of requests).
func NewReport(r Range, rows []Row) Report {
	rep := Report{From: r.From.Format(DateLayout), To: r.To.Format(DateLayout), Rows: rows,
		Totals: Totals{ByStatus: map[string]int64{}, ByService: map[string]int64{}, ByChannel: map[string]int64{}}}
	if rep.Rows == nil {
		rep.Rows = []Row{}
	}
	sort.SliceStable(rep.Rows, func(i, j int) bool { return rep.Rows[i].Day < rep.Rows[j].Day })
	for _, row := range rows {
		rep.Totals.Requests += row.Count
		rep.Totals.ByStatus[row.Status] += row.Count
		rep.Totals.ByService[row.ServiceID] += row.Count
		rep.Totals.ByChannel[row.Channel] += row.Count
	}
	return rep
}
