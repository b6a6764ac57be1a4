package document

import (
	"strings"
	"unicode"
)

// Stop words are frequent enough that a few lines of text contain several;
// they are what tells Portuguese from English without a model.
var stopWords = map[string][]string{
	"por": {"de", "da", "do", "das", "dos", "que", "para", "com", "não", "uma", "os", "as", "no", "na", "em", "um", "por", "se", "ao", "pela", "pelo", "é", "são", "foi", "mais", "também"},
	"eng": {"the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "was", "on", "be", "by", "this", "are", "from", "or", "an", "which", "not"},
}

// GuessLanguage returns "por" or "eng" by counting each language's stop
// words, or "und" when neither appears.
func GuessLanguage(text string) string {
	sets := map[string]map[string]bool{}
	for lang, words := range stopWords {
		sets[lang] = map[string]bool{}
		for _, w := range words {
			sets[lang][w] = true
		}
	}
	counts := map[string]int{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
		for lang, set := range sets {
			if set[w] {
				counts[lang]++
			}
		}
	}
	switch {
	case counts["por"] == 0 && counts["eng"] == 0:
		return "und"
	case counts["por"] >= counts["eng"]:
		return "por"
	default:
		return "eng"
	}
}
