package process

import (
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
