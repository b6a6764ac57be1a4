package schedule

import (
	"errors"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"defaults", Spec{Name: "daily", Cron: "0 6 * * *"}, true},
		{"seconds and zone", Spec{Name: "s", Cron: "*/5 * * * * *", TimeZone: "America/Sao_Paulo", CatchUp: CatchUpAll, MaxCatchUp: 3}, true},
		{"descriptor", Spec{Name: "h", Cron: "@hourly"}, true},
		{"no name", Spec{Cron: "@hourly"}, false},
		{"bad cron", Spec{Name: "x", Cron: "61 * * * *"}, false},
		{"zone in the expression", Spec{Name: "x", Cron: "CRON_TZ=UTC 0 6 * * *"}, false},
		{"unknown zone", Spec{Name: "x", Cron: "@daily", TimeZone: "Mars/Olympus"}, false},
		{"unknown policy", Spec{Name: "x", Cron: "@daily", CatchUp: "some"}, false},
		{"too much catch-up", Spec{Name: "x", Cron: "@daily", MaxCatchUp: MaxCatchUpLimit + 1}, false},
		{"payload not an object", Spec{Name: "x", Cron: "@daily", Payload: []byte(`[1]`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec
			_, _, err := s.Check()
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("Check = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && (s.TimeZone == "" || s.CatchUp == "" || s.MaxCatchUp == 0 || string(s.Payload) == "") {
				t.Errorf("defaults not filled: %+v", s)
			}
		})
	}
}

func TestDue(t *testing.T) {
	s := Spec{Name: "hourly", Cron: "0 * * * *"}
	sched, loc, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 12, 1, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name      string
		next, now time.Time
		policy    CatchUp
		max       int
		fire      []time.Time
		skipped   int
	}{
		{"not yet due", at(10, 0), at(9, 59), CatchUpLatest, 10, nil, 0},
		{"on time", at(10, 0), at(10, 0), CatchUpLatest, 10, []time.Time{at(10, 0)}, 0},
		{"latest after an outage", at(6, 0), at(10, 30), CatchUpLatest, 10, []time.Time{at(10, 0)}, 4},
		{"all within the bound", at(8, 0), at(10, 30), CatchUpAll, 10, []time.Time{at(8, 0), at(9, 0), at(10, 0)}, 0},
		{"all beyond the bound keeps the newest", at(5, 0), at(10, 30), CatchUpAll, 2, []time.Time{at(9, 0), at(10, 0)}, 4},
		{"none within grace", at(10, 0), at(10, 0).Add(30 * time.Second), CatchUpNone, 10, []time.Time{at(10, 0)}, 0},
		{"none too late", at(9, 0), at(10, 5), CatchUpNone, 10, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Due(sched, loc, tc.next, tc.now, tc.policy, tc.max)
			if len(p.Fire) != len(tc.fire) || p.Skipped != tc.skipped {
				t.Fatalf("Due = fire %v skipped %d, want %v and %d", p.Fire, p.Skipped, tc.fire, tc.skipped)
			}
			for i := range p.Fire {
				if !p.Fire[i].Equal(tc.fire[i]) {
					t.Errorf("fire[%d] = %v, want %v", i, p.Fire[i], tc.fire[i])
				}
			}
			if !p.Next.After(tc.now) || p.Next.Minute() != 0 {
				t.Errorf("next = %v, want the first slot after %v", p.Next, tc.now)
			}
		})
	}
}

func TestDueInTheSchedulesZone(t *testing.T) {
	s := Spec{Name: "morning", Cron: "0 6 * * *", TimeZone: "America/Sao_Paulo"}
	sched, loc, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	// 06:00 in São Paulo (UTC-3) is 09:00 UTC.
	got := Next(sched, loc, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next = %v, want %v", got, want)
	}
}
