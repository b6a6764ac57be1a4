package httpapi

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// chunked hands out at most n bytes per Read.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

func TestCloseWatchSeesTheCloseDelimiterAcrossReads(t *testing.T) {
	const b = "xyz"
	tests := []struct {
		name string
		body string
		seen bool
	}{
		{"whole body", "--xyz\r\nh: v\r\n\r\ndata\r\n--xyz--\r\n", true},
		{"close delimiter at the very end", "--xyz\r\n\r\ndata\r\n--xyz--", true},
		{"no parts at all", "--xyz--\r\n", true},
		{"opening delimiter, then nothing", "--xyz\r\n\r\ndata\r\n--xyz\r\n", false},
		{"cut inside the close delimiter", "--xyz\r\n\r\ndata\r\n--xyz-", false},
		{"boundary-like text not at a line start", "--xyz\r\n\r\nda--xyz--ta", false},
	}
	for _, tc := range tests {
		for n := 1; n <= len(tc.body); n++ {
			w := newCloseWatch(chunked{strings.NewReader(tc.body), n}, b)
			if _, err := io.ReadAll(iotest.HalfReader(w)); err != nil {
				t.Fatal(err)
			}
			if w.seen != tc.seen {
				t.Errorf("%s, reads of %d bytes: seen = %v, want %v", tc.name, n, w.seen, tc.seen)
			}
		}
	}
}
