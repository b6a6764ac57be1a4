package knowledge

import (
	"strings"
	"unicode"
)

// ChunkOptions shape the windows Split makes.
type ChunkOptions struct {
	// Target is the preferred chunk size in characters (default 800).
	Target int
	// OverlapSentences is how many sentences of a chunk's end open the
	// next one (0: none; the service configures 1), so an answer straddling a boundary is whole in
	// one of them.
	OverlapSentences int
}

// Split cuts text into overlapping windows of whole sentences of about
// opts.Target characters. A single sentence longer than the target is cut
// at word boundaries. It returns nil for text without words.
func Split(text string, opts ChunkOptions) []string {
	if opts.Target <= 0 {
		opts.Target = 800
	}
	if opts.OverlapSentences < 0 {
		opts.OverlapSentences = 0
	}
	var sentences []string
	for _, s := range Sentences(text) {
		sentences = append(sentences, cutLong(s, opts.Target)...)
	}
	var chunks []string
	for start := 0; start < len(sentences); {
		end, size := start, 0
		for end < len(sentences) && (end == start || size+1+len(sentences[end]) <= opts.Target) {
			size += len(sentences[end]) + 1
			end++
		}
		chunks = append(chunks, strings.Join(sentences[start:end], " "))
		if end == len(sentences) {
			break
		}
		// Step back by the overlap, but always move forward.
		start = max(end-opts.OverlapSentences, start+1)
	}
	return chunks
}

// Sentences splits text at ., ! or ? followed by white space, and at blank
// lines; white space inside a sentence is collapsed.
func Sentences(text string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	runes := []rune(text)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		cur.WriteRune(r)
		next := rune(0)
		if i+1 < len(runes) {
			next = runes[i+1]
		}
		switch {
		case (r == '.' || r == '!' || r == '?') && (next == 0 || unicode.IsSpace(next)):
			flush()
		case r == '\n' && next == '\n', r == '\f':
			flush()
		}
	}
	flush()
	return out
}

func cutLong(s string, target int) []string {
	if len(s) <= target {
		return []string{s}
	}
	var out []string
	var cur []string
	size := 0
	for _, w := range strings.Fields(s) {
		if size > 0 && size+1+len(w) > target {
			out = append(out, strings.Join(cur, " "))
			cur, size = nil, 0
		}
		cur = append(cur, w)
		size += len(w) + 1
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, " "))
	}
	return out
}
