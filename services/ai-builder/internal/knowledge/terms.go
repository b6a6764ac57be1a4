package knowledge

import (
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Fold lowercases s and removes accents ("Certidão" → "certidao"), so
// spelling with or without diacritics — common in OCR output and typed
// questions — compares equal.
func Fold(s string) string {
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	out, _, err := transform.String(t, strings.ToLower(s))
	if err != nil {
		return strings.ToLower(s)
	}
	return out
}

// stopWords carry no topic: they would make every text look alike.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a o as os um uma uns umas de da do das dos di em no na nos nas ao aos
		e ou que se por para pela pelo pelas pelos com sem sob sobre como mais menos ja nao sim foi ser sao
		e eh esta este esse essa isso isto qual quais quando onde quem cujo seu sua seus suas meu minha
		the of and to in is that for it with as was on be by this are from or an which not what who how`) {
		m[w] = true
	}
	return m
}()

// Terms returns the folded words of s that carry meaning (no stop words).
func Terms(s string) []string {
	words := strings.FieldsFunc(Fold(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := words[:0]
	for _, w := range words {
		if !stopWords[w] {
			out = append(out, w)
		}
	}
	return out
}
