package doctest_test

import (
	"testing"

	"github.com/agora-platform/agora/services/document-worker/doctest"
)

func TestWordAccuracy(t *testing.T) {
	cases := []struct {
		want, got string
		acc       float64
	}{
		{"Olá, mundo!", "olá mundo", 1},
		{"a b c d", "a x c d", 0.75},
		{"a b c d", "d c b a", 0.25},
		{"a b", "", 0},
		{"", "qualquer", 1},
	}
	for _, c := range cases {
		if got := doctest.WordAccuracy(c.want, c.got); got != c.acc {
			t.Errorf("WordAccuracy(%q, %q) = %v, want %v", c.want, c.got, got, c.acc)
		}
	}
}
