package topology_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/topology"
)

func TestLookup(t *testing.T) {
	d := topology.Description{Consumers: []topology.Consumer{{Queue: "a.one"}, {Queue: "a.two"}, {Queue: "b.one"}}}
	tests := []struct {
		queues  []string
		want    []string
		wantErr string
	}{
		{queues: []string{"a.two", "a.one"}, want: []string{"a.two", "a.one"}},
		{queues: []string{"b.one"}, want: []string{"b.one"}},
		{queues: nil, want: []string{}},
		{queues: []string{"a.one", "c.missing"}, wantErr: "topology has no queue c.missing"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.queues, ","), func(t *testing.T) {
			got, err := d.Lookup(tt.queues...)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Lookup(%q) = %v, %v; want error %q", tt.queues, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, c := range got {
				names = append(names, c.Queue)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("Lookup(%q) = %q, want %q", tt.queues, names, tt.want)
			}
		})
	}
}
