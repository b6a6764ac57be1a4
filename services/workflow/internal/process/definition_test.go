package process

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultCatalog(t *testing.T) {
	c, err := ParseCatalog(DefaultDefinitions)
	if err != nil {
		t.Fatalf("ParseCatalog(definitions.json) = %v", err)
	}
	tests := []struct{ service, want string }{
		{"building-permit", "building-permit"},
		{"iptu-segunda-via", "single-step"},
		{"anything-else", "standard-review"},
		{"", "standard-review"},
	}
	for _, tc := range tests {
		if got := c.For(tc.service).ID; got != tc.want {
			t.Errorf("For(%q) = %s, want %s", tc.service, got, tc.want)
		}
	}
	if sla := c.For("building-permit").Steps[1].SLA; sla != 120*time.Hour {
		t.Errorf("building-permit step 1 SLA = %s, want 120h", sla)
	}
}

func TestParseCatalogRejects(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"no default", `{"default":"x","definitions":[{"id":"a","steps":[{"name":"s","assigneeRole":"attendant","sla":"1h"}]}]}`, `default definition "x"`},
		{"no steps", `{"default":"a","definitions":[{"id":"a","steps":[]}]}`, "no steps"},
		{"bad sla", `{"default":"a","definitions":[{"id":"a","steps":[{"name":"s","assigneeRole":"attendant","sla":"soon"}]}]}`, "sla"},
		{"bad role", `{"default":"a","definitions":[{"id":"a","steps":[{"name":"s","assigneeRole":"citizen","sla":"1h"}]}]}`, "assigneeRole"},
		{"service twice", `{"default":"a","definitions":[{"id":"a","services":["x"],"steps":[{"name":"s","assigneeRole":"attendant","sla":"1h"}]},{"id":"b","services":["x"],"steps":[{"name":"s","assigneeRole":"attendant","sla":"1h"}]}]}`, "service x"},
		{"not JSON", `{`, "process definitions"},
		{"bad stuckAfter", `{"default":"a","definitions":[{"id":"a","stuckAfter":"-1h","steps":[{"name":"s","assigneeRole":"attendant","sla":"1h"}]}]}`, "stuckAfter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseCatalog = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestAdvance(t *testing.T) {
	d := Definition{ID: "d", Steps: []Step{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	tests := []struct {
		step     int
		outcome  string
		next     int
		done     bool
		finalOut string
	}{
		{0, "", 1, false, ""},
		{0, "approved", 1, false, ""},
		{1, "rejected", 1, true, "rejected"},
		{2, "approved", 2, true, "approved"},
		{2, "done", 2, true, "completed"},
		{2, "", 2, true, "completed"},
	}
	for _, tc := range tests {
		next, done, out := d.Advance(tc.step, tc.outcome)
		if next != tc.next || done != tc.done || out != tc.finalOut {
			t.Errorf("Advance(%d, %q) = %d %v %q, want %d %v %q", tc.step, tc.outcome, next, done, out, tc.next, tc.done, tc.finalOut)
		}
	}
}

func TestSEIUnit(t *testing.T) {
	tests := []struct {
		name, unit string
		ok         bool
	}{
		{"none", ``, true},
		{"a unit", `"SEMURB-LIC"`, true},
		{"blank around", `" SEMURB"`, false},
		{"too long", `"` + strings.Repeat("u", 101) + `"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			unit := ""
			if tc.unit != "" {
				unit = `"seiUnit":` + tc.unit + `,`
			}
			c, err := ParseCatalog([]byte(`{"default":"a","definitions":[{"id":"a",` + unit +
				`"steps":[{"name":"s","assigneeRole":"attendant","sla":"1h"}]}]}`))
			if (err == nil) != tc.ok {
				t.Fatalf("ParseCatalog = %v, want ok %v", err, tc.ok)
			}
			if tc.ok {
				var want string
				if tc.unit != "" {
					_ = json.Unmarshal([]byte(tc.unit), &want)
				}
				if got := c.For("x").SEIUnit; got != want {
					t.Errorf("SEIUnit = %q, want %q", got, want)
				}
			}
		})
	}
}

func TestDecisionCheck(t *testing.T) {
	long := strings.Repeat("é", MaxReasonLen) // 1000 characters, 2000 bytes
	tests := []struct {
		name       string
		d          Decision
		err        error
		wantReason string
	}{
		{"done without reason", Decision{Outcome: "done"}, nil, ""},
		{"no outcome", Decision{}, nil, ""},
		{"approved with reason", Decision{Outcome: "approved", Reason: " ok "}, nil, "ok"},
		{"rejected with reason", Decision{Outcome: "rejected", Reason: "missing deed"}, nil, "missing deed"},
		{"rejected at the limit", Decision{Outcome: "rejected", Reason: long}, nil, long},
		{"rejected without reason", Decision{Outcome: "rejected"}, ErrInvalidReason, ""},
		{"rejected with blanks", Decision{Outcome: "rejected", Reason: " \t\n"}, ErrInvalidReason, ""},
		{"reason too long", Decision{Outcome: "done", Reason: long + "x"}, ErrInvalidReason, ""},
		{"unknown outcome first", Decision{Outcome: "maybe"}, ErrInvalidOutcome, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.d.Check()
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Check() = %v, want %v", err, tc.err)
			}
			if err == nil && got.Reason != tc.wantReason {
				t.Errorf("reason = %q, want %q", got.Reason, tc.wantReason)
			}
		})
	}
}

func TestWaitingFor(t *testing.T) {
	c, err := ParseCatalog(DefaultDefinitions)
	if err != nil {
		t.Fatal(err)
	}
	got := c.WaitingFor("document.validated.v1")
	want := []Waiting{{Definition: "document-verification", Services: []string{"segunda-via-rg"}, Step: "document-check"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WaitingFor(document.validated.v1) = %+v, want %+v", got, want)
	}
	if got := c.WaitingFor("request.submitted.v1"); len(got) != 0 {
		t.Errorf("WaitingFor(request.submitted.v1) = %+v, want none", got)
	}
}
