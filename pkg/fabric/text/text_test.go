package text

import (
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short enough", "ação", 10, "ação"},
		{"exactly the limit", "ação", 6, "ação"},
		{"cut after a 2-byte character, before the next", "ação!", 6, "aç…"},
		{"cut inside a 2-byte character", "ação!", 5, "a…"},
		{"cut after a 2-byte character", "ação!!", 7, "aç…"},
		{"cut inside a 3-byte character", "a€€", 6, "a…"},
		{"cut inside a 4-byte character", "a😀b", 5, "a…"},
		{"cut right after a 4-byte character", "a😀bcde", 8, "a😀…"},
		{"only the ellipsis fits", "abcdef", 3, "…"},
		{"nothing fits", "abcdef", 2, ""},
		{"NUL dropped", "a\x00b", 10, "ab"},
		{"invalid UTF-8 replaced", "a\xffb", 10, "a\uFFFDb"},
		{"replacement counted in the limit", "a\xffbcdef", 6, "a…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.n)
			if got != tc.want || !utf8.ValidString(got) || len(got) > tc.n {
				t.Errorf("Truncate(%q, %d) = %q (%d bytes), want %q", tc.in, tc.n, got, len(got), tc.want)
			}
		})
	}
}
