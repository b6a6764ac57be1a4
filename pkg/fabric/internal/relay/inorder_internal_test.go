package relay

import (
	"slices"
	"testing"
)

// TestInOrder: a batch keeps, per aggregate, the run of its rows that
// matches the aggregate's pending rows from the oldest on; the first gap
// (a pending row locked elsewhere or waiting for a retry) holds back every
// later row of that aggregate, and no other aggregate's.
func TestInOrder(t *testing.T) {
	type r struct {
		seq     int64
		agg     string
		pending []int64 // on the aggregate's first row in the batch
	}
	tests := []struct {
		name  string
		batch []r
		want  []int64
	}{
		{"one row each, nothing earlier", []r{{1, "a", []int64{1}}, {2, "b", []int64{2}}}, []int64{1, 2}},
		{"a run of one aggregate", []r{{1, "a", []int64{1, 3, 5}}, {3, "a", nil}, {5, "a", nil}}, []int64{1, 3, 5}},
		{"an earlier row held elsewhere", []r{{3, "a", []int64{2, 3}}, {4, "b", []int64{4}}}, []int64{4}},
		{"a gap in the middle", []r{{1, "a", []int64{1, 2, 3}}, {3, "a", nil}, {4, "b", []int64{4}}}, []int64{1, 4}},
		{"after a gap, nothing more of it", []r{{1, "a", []int64{1, 2, 5, 6}}, {5, "a", nil}, {6, "a", nil}}, []int64{1}},
		{"interleaved aggregates", []r{{1, "a", []int64{1, 3}}, {2, "b", []int64{2, 4}}, {3, "a", nil}, {4, "b", nil}}, []int64{1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var batch []*row
			for _, x := range tt.batch {
				batch = append(batch, &row{seq: x.seq, aggType: "request", aggID: x.agg, aggPending: x.pending})
			}
			var got []int64
			for _, rw := range inOrder(batch) {
				got = append(got, rw.seq)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("kept %v, want %v", got, tt.want)
			}
		})
	}
}
