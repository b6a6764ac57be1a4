package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Query names one of the declared queries a schedule may run at each slot
// (seed 004 §56-57, "permits expiring in 24 h"). Tenants choose a query
// and its parameters; they never write SQL: each query is code of this
// service, runs in the schedule's tenant transaction under row-level
// security, and selects at most MaxSelected entities per slot.
type Query struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params,omitempty"`
}

// The declared queries.
const (
	// RequestsDueWithin selects open requests whose current task falls
	// due within params.within (not yet due: an overdue task is
	// task.sla-breached.v1's).
	RequestsDueWithin = "requests-due-within"
	// RequestsWaitingLongerThan selects open requests whose current task
	// has been open longer than params.longerThan.
	RequestsWaitingLongerThan = "requests-waiting-longer-than"
	// ProcessesInStep selects running processes whose open task is the
	// step params.step.
	ProcessesInStep = "processes-in-step"
)

// MaxSelected bounds what one slot selects: a query matching more fires
// for the first MaxSelected (the most urgent first), and the slot records
// that it was truncated. The rest are selected again at the next slot.
const MaxSelected = 500

// Duration bounds of the duration parameters: at least a minute (a
// finer query is noise), at most a year.
const (
	minQueryDuration = time.Minute
	maxQueryDuration = 366 * 24 * time.Hour
)

// Selection is a checked query, ready to run: which declared query and
// its parsed parameter.
type Selection struct {
	Name     string
	Duration time.Duration // RequestsDueWithin, RequestsWaitingLongerThan
	Step     string        // ProcessesInStep
}

// declared maps each query's name to the check of its parameters.
var declared = map[string]func(json.RawMessage) (Selection, error){
	RequestsDueWithin:         durationParam(RequestsDueWithin, "within"),
	RequestsWaitingLongerThan: durationParam(RequestsWaitingLongerThan, "longerThan"),
	ProcessesInStep:           stepParam,
}

// QueryNames lists the declared queries, sorted (for messages and docs).
func QueryNames() []string {
	names := make([]string, 0, len(declared))
	for n := range declared {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Check validates q: a declared name and exactly its parameters.
func (q Query) Check() (Selection, error) {
	parse, ok := declared[q.Name]
	if !ok {
		return Selection{}, fmt.Errorf("%w: query.name %q: not a declared query (want one of %s)", ErrInvalid, q.Name, strings.Join(QueryNames(), ", "))
	}
	sel, err := parse(q.Params)
	if err != nil {
		return Selection{}, fmt.Errorf("%w: query %s: params: %v", ErrInvalid, q.Name, err)
	}
	return sel, nil
}

func durationParam(name, field string) func(json.RawMessage) (Selection, error) {
	return func(params json.RawMessage) (Selection, error) {
		var p map[string]*string
		if err := strictObject(params, &p, field); err != nil {
			return Selection{}, err
		}
		v := p[field]
		if v == nil {
			return Selection{}, fmt.Errorf("%s is required (a Go duration such as 24h)", field)
		}
		d, err := time.ParseDuration(*v)
		if err != nil {
			return Selection{}, fmt.Errorf("%s %q: not a Go duration such as 24h", field, *v)
		}
		if d < minQueryDuration || d > maxQueryDuration {
			return Selection{}, fmt.Errorf("%s %s: want %s to %s", field, *v, minQueryDuration, maxQueryDuration)
		}
		return Selection{Name: name, Duration: d}, nil
	}
}

func stepParam(params json.RawMessage) (Selection, error) {
	var p map[string]*string
	if err := strictObject(params, &p, "step"); err != nil {
		return Selection{}, err
	}
	v := p["step"]
	if v == nil || strings.TrimSpace(*v) == "" || len(*v) > 100 {
		return Selection{}, fmt.Errorf("step is required: a step name of 1 to 100 characters")
	}
	return Selection{Name: ProcessesInStep, Step: *v}, nil
}

// strictObject decodes params as an object of string fields and refuses
// any field but the allowed ones: a typo in a parameter's name must not
// run the query without it.
func strictObject(params json.RawMessage, p *map[string]*string, allowed ...string) error {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	if err := dec.Decode(p); err != nil || *p == nil || dec.More() {
		return fmt.Errorf("want an object of %s", strings.Join(allowed, ", "))
	}
	for k := range *p {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("unknown parameter %q (want %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}
