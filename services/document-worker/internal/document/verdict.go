package document

import (
	"fmt"
	"strings"
	"unicode"
)

// DocKind is the kind of document the text appears to be (the
// document.validated.v1 enum, extensible: kinds may be added later).
type DocKind string

// Document kinds.
const (
	DocIdentity       DocKind = "identity"
	DocProofOfAddress DocKind = "proof-of-address"
	DocProofOfIncome  DocKind = "proof-of-income"
	DocUnknown        DocKind = "unknown"
)

// DefaultMinLetters is how many letters a document's text needs, by
// default, to count as readable.
const DefaultMinLetters = 20

// Names of the checks behind a verdict, in the order they are made.
const (
	CheckReadable = "readable"
	CheckKind     = "kind"
)

// Check is one test behind a Verdict.
type Check struct {
	Name   string
	Passed bool
	Detail string
}

// Verdict is the worker's opinion of an extracted document: whether its
// text is readable and which kind of document it appears to be.
type Verdict struct {
	// Valid: the text is readable (CheckReadable passed). The kind does not
	// decide validity: which kind a request needs is for its subscription
	// to say (e.g. payload.valid && payload.kind == 'identity').
	Valid bool
	Kind  DocKind
	// Checks are never nil: CheckReadable, then CheckKind.
	Checks []Check
	// Reason says why an invalid document is not valid; empty when valid.
	Reason string
}

// keyword is a word or phrase that suggests a kind of document. A strong
// keyword names the document itself ("holerite", "carteira de identidade");
// a weak one is a field such documents carry but others do too ("CPF",
// "endereço").
type keyword struct {
	text   string
	strong bool
}

// Weights of a keyword's match in a kind's score.
const (
	strongWeight = 3
	weakWeight   = 1
)

// kindKeywords are the Portuguese and English keywords of each kind, in
// the order they are reported. Written in plain lower case; they are folded
// like the text before matching.
var kindKeywords = []struct {
	kind     DocKind
	keywords []keyword
}{
	{DocIdentity, []keyword{
		{"carteira de identidade", true}, {"cédula de identidade", true}, {"documento de identidade", true},
		{"registro geral", true}, {"carteira nacional de habilitação", true}, {"passaporte", true},
		{"identity card", true}, {"identity document", true}, {"passport", true}, {"driver's license", true},
		{"rg", false}, {"cpf", false}, {"data de nascimento", false}, {"filiação", false}, {"naturalidade", false},
		{"date of birth", false}, {"nationality", false},
	}},
	{DocProofOfAddress, []keyword{
		{"comprovante de residência", true}, {"comprovante de endereço", true}, {"certidão de residência", true},
		{"atestado de residência", true}, {"declaração de residência", true}, {"conta de luz", true}, {"conta de água", true},
		{"proof of address", true}, {"proof of residence", true}, {"utility bill", true},
		{"endereço", false}, {"cep", false}, {"logradouro", false}, {"bairro", false}, {"address", false}, {"zip code", false},
	}},
	{DocProofOfIncome, []keyword{
		{"holerite", true}, {"contracheque", true}, {"comprovante de renda", true}, {"comprovante de rendimentos", true},
		{"demonstrativo de pagamento", true}, {"declaração de imposto de renda", true},
		{"payslip", true}, {"pay slip", true}, {"proof of income", true}, {"pay stub", true},
		{"salário", false}, {"renda", false}, {"remuneração", false}, {"rendimentos", false}, {"inss", false}, {"fgts", false},
		{"salary", false}, {"income", false}, {"gross pay", false}, {"net pay", false},
	}},
}

// Validator decides a document's Verdict from its extracted text.
type Validator struct {
	// MinLetters is how many letters the text needs to be readable;
	// DefaultMinLetters when zero or less.
	MinLetters int
}

// Validate is Validator{}.Validate: the verdict with DefaultMinLetters.
func Validate(text string, pages int) Verdict { return Validator{}.Validate(text, pages) }

// Validate returns the verdict on a document whose extracted text is text,
// over pages pages. It is a heuristic, and deterministic (the same text
// always gets the same verdict):
//
//   - readable: the text holds at least MinLetters letters (any script,
//     digits and punctuation not counted): a blank scan, a photo of
//     nothing or OCR noise of a few characters is not readable;
//   - kind: each kind's keywords (Portuguese and English, matched as whole
//     words after folding case and accents, so "ENDERECO" matches
//     "endereço") score 3 when they name the document ("holerite") and 1 when
//     they are a field such documents carry ("CPF"). The highest score wins;
//     no match, or a tie between kinds, is DocUnknown. An unreadable
//     document is DocUnknown whatever its few words say.
//
// Valid is the readable check alone.
func (v Validator) Validate(text string, pages int) Verdict {
	minLetters := v.MinLetters
	if minLetters <= 0 {
		minLetters = DefaultMinLetters
	}
	letters := 0
	for _, r := range text {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	readable := Check{Name: CheckReadable, Passed: letters >= minLetters,
		Detail: fmt.Sprintf("%d letters in %d page(s), want at least %d", letters, pages, minLetters)}
	if !readable.Passed {
		return Verdict{Valid: false, Kind: DocUnknown,
			Checks: []Check{readable, {Name: CheckKind, Passed: false, Detail: "not looked for: the text is not readable"}},
			Reason: fmt.Sprintf("unreadable: %d letters of text, want at least %d", letters, minLetters)}
	}
	kind, detail := detectKind(text)
	return Verdict{Valid: true, Kind: kind,
		Checks: []Check{readable, {Name: CheckKind, Passed: kind != DocUnknown, Detail: detail}}}
}

// detectKind scores text against kindKeywords; it returns the kind and
// what decided it.
func detectKind(text string) (DocKind, string) {
	folded := " " + fold(text) + " "
	best, bestScore, tie := DocUnknown, 0, false
	var found []string
	for _, k := range kindKeywords {
		score := 0
		var matched []string
		for _, kw := range k.keywords {
			if strings.Contains(folded, " "+fold(kw.text)+" ") {
				matched = append(matched, kw.text)
				if kw.strong {
					score += strongWeight
				} else {
					score += weakWeight
				}
			}
		}
		if score == 0 {
			continue
		}
		found = append(found, fmt.Sprintf("%s %d (%s)", k.kind, score, strings.Join(matched, ", ")))
		switch {
		case score > bestScore:
			best, bestScore, tie = k.kind, score, false
		case score == bestScore:
			tie = true
		}
	}
	switch {
	case bestScore == 0:
		return DocUnknown, "no keyword of a known kind"
	case tie:
		return DocUnknown, "ambiguous: " + strings.Join(found, "; ")
	}
	return best, strings.Join(found, "; ")
}

// accents maps the accented letters of Portuguese to their base letter.
var accents = strings.NewReplacer(
	"á", "a", "à", "a", "â", "a", "ã", "a", "ä", "a",
	"é", "e", "è", "e", "ê", "e", "ë", "e",
	"í", "i", "ì", "i", "î", "i", "ï", "i",
	"ó", "o", "ò", "o", "ô", "o", "õ", "o", "ö", "o",
	"ú", "u", "ù", "u", "û", "u", "ü", "u",
	"ç", "c", "ñ", "n",
)

// fold lowers s, strips the accents of Portuguese letters and turns every
// run of other characters than letters and digits into one space.
func fold(s string) string {
	s = accents.Replace(strings.ToLower(s))
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), " ")
}
