package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQueryCheck(t *testing.T) {
	for _, tc := range []struct {
		name, query, params string
		want                Selection
		err                 string // a part of the message; "" when valid
	}{
		{"due within", RequestsDueWithin, `{"within":"24h"}`, Selection{Name: RequestsDueWithin, Duration: 24 * time.Hour}, ""},
		{"waiting", RequestsWaitingLongerThan, `{"longerThan":"72h"}`, Selection{Name: RequestsWaitingLongerThan, Duration: 72 * time.Hour}, ""},
		{"in step", ProcessesInStep, `{"step":"document-check"}`, Selection{Name: ProcessesInStep, Step: "document-check"}, ""},
		{"unknown query", "all-requests", `{}`, Selection{}, "not a declared query"},
		{"no query name", "", `{}`, Selection{}, "not a declared query"},
		{"missing param", RequestsDueWithin, ``, Selection{}, "within is required"},
		{"typo in a param", RequestsDueWithin, `{"witihn":"24h"}`, Selection{}, `unknown parameter "witihn"`},
		{"extra param", ProcessesInStep, `{"step":"x","role":"attendant"}`, Selection{}, `unknown parameter "role"`},
		{"not a duration", RequestsDueWithin, `{"within":"a day"}`, Selection{}, "not a Go duration"},
		{"a number", RequestsDueWithin, `{"within":24}`, Selection{}, "want an object"},
		{"too short", RequestsWaitingLongerThan, `{"longerThan":"1s"}`, Selection{}, "want 1m0s to"},
		{"too long", RequestsDueWithin, `{"within":"9000h"}`, Selection{}, "want 1m0s to"},
		{"negative", RequestsDueWithin, `{"within":"-1h"}`, Selection{}, "want 1m0s to"},
		{"blank step", ProcessesInStep, `{"step":" "}`, Selection{}, "step is required"},
		{"params an array", ProcessesInStep, `["x"]`, Selection{}, "want an object"},
		{"params null", ProcessesInStep, `null`, Selection{}, "want an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Query{Name: tc.query, Params: []byte(tc.params)}.Check()
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Check = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Check = %v, want ErrInvalid saying %q", err, tc.err)
			}
		})
	}
}

// A schedule's query is checked with the rest of the schedule.
func TestCheckRefusesABadQuery(t *testing.T) {
	s := Spec{Name: "x", Cron: "@daily", Query: &Query{Name: "drop-tables"}}
	if _, _, err := s.Check(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "drop-tables") {
		t.Fatalf("Check = %v, want the unknown query refused", err)
	}
}
