// Package text makes arbitrary strings (error messages, tool output, remote
// response bodies) safe to store and send: valid UTF-8, no NUL, bounded.
// PostgreSQL refuses NUL and invalid UTF-8 in text columns, and a byte cut
// in the middle of a character makes an otherwise valid string invalid.
package text

import (
	"strings"
	"unicode/utf8"
)

const ellipsis = "…"

// Truncate returns s as valid UTF-8 without NUL characters (invalid bytes
// become U+FFFD), cut at a character boundary to at most n bytes; a cut
// string ends in "…" within those n bytes.
func Truncate(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n - len(ellipsis)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if cut == 0 && n < len(ellipsis) {
		return ""
	}
	return s[:cut] + ellipsis
}
