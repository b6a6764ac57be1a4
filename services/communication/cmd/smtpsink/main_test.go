package main

import (
	"path/filepath"
	"testing"
)

// TestDedupe: with -dedupe a message whose Message-ID was written is
// accepted and not written again; without it, or without a Message-ID,
// every message is written.
func TestDedupe(t *testing.T) {
	msg := func(id string) []byte {
		h := "From: a@example.org\r\nSubject: hello\r\n"
		if id != "" {
			h += "Message-ID: <" + id + "@agora.communication>\r\n"
		}
		return []byte(h + "\r\nbody\r\n")
	}
	tests := []struct {
		name   string
		dedupe bool
		bodies [][]byte
		want   int
	}{
		{"dedupe: one file per Message-ID", true, [][]byte{msg("n-1"), msg("n-1"), msg("n-2")}, 2},
		{"dedupe: a message without Message-ID is always written", true, [][]byte{msg(""), msg("")}, 2},
		{"no dedupe: every message is written", false, [][]byte{msg("n-1"), msg("n-1")}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &backend{dir: t.TempDir()}
			if tc.dedupe {
				b.seen = map[string]bool{}
			}
			for _, body := range tc.bodies {
				s := &session{b: b, from: "a@example.org", to: []string{"c@example.org"}}
				if err := b.keepOnce(body, func() error { return s.write(body) }); err != nil {
					t.Fatal(err)
				}
			}
			files, err := filepath.Glob(filepath.Join(b.dir, "*.eml"))
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != tc.want {
				t.Errorf("files = %d, want %d", len(files), tc.want)
			}
		})
	}
}
