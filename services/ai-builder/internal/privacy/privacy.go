// Package privacy masks personal data in text before it leaves the
// platform (to an external language model or embedding service).
package privacy

import "regexp"

// Masks replace what they find with a label, so a model still sees that
// something was there.
const (
	MaskCPF   = "[CPF]"
	MaskEmail = "[EMAIL]"
	MaskPhone = "[TELEFONE]"
)

// Order matters: e-mails first (they may contain digits), then CPF (whose
// 11 digits would also look like a phone number), then phones.
var patterns = []struct {
	re   *regexp.Regexp
	mask string
}{
	{regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`), MaskEmail},
	{regexp.MustCompile(`\b\d{3}\.?\d{3}\.?\d{3}-?\d{2}\b`), MaskCPF},
	// Brazilian numbers with or without +55, area code in parentheses or
	// not, 8 or 9 digits; and other international numbers.
	{regexp.MustCompile(`(?:\+55[\s-]?)?(?:\(\d{2}\)|\b\d{2})[\s-]?9?\d{4}[\s-]?\d{4}\b`), MaskPhone},
	{regexp.MustCompile(`\+\d{1,3}(?:[\s-]?\d{2,4}){2,4}\b`), MaskPhone},
}

// Mask returns text with CPF numbers, e-mail addresses and phone numbers
// replaced by MaskCPF, MaskEmail and MaskPhone.
func Mask(text string) string {
	for _, p := range patterns {
		text = p.re.ReplaceAllString(text, p.mask)
	}
	return text
}
