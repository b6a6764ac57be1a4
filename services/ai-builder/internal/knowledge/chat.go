package knowledge

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Limits of a chat question.
const (
	MaxTopK           = 20
	DefaultTopK       = 5
	MaxQuestionLength = 2000
	passagesInAnswer  = 3
)

// Passage is a chunk found for a question, with its cosine similarity.
type Passage struct {
	ChunkID    string
	DocumentID string
	Content    string
	Score      float64
}

// Searcher finds the passages nearest to a vector in one tenant's
// partition — never another's.
type Searcher interface {
	Search(ctx context.Context, tenantID string, vector []float32, k int) ([]Passage, error)
}

// Generator writes an answer from passages through a language model. The
// implementation masks personal data before text leaves the platform.
type Generator interface {
	Generate(ctx context.Context, question string, passages []Passage) (string, error)
}

// Citation points at the chunk an answer used.
type Citation struct {
	DocumentID string
	ChunkID    string
	Score      float64
}

// Answer is the reply to a question.
type Answer struct {
	Text      string
	Citations []Citation
	Generated bool
}

// NoAnswer is the text of an answer for which nothing was found.
const NoAnswer = "No indexed document of your organisation answers this question."

// Chat answers questions from a tenant's knowledge.
type Chat struct {
	embedder Embedder
	search   Searcher
	gen      Generator // nil: extractive answers
}

// NewChat returns a Chat; gen may be nil for extractive answers only.
func NewChat(embedder Embedder, search Searcher, gen Generator) *Chat {
	return &Chat{embedder: embedder, search: search, gen: gen}
}

// Ask embeds question, searches tenantID's partition for the topK nearest
// chunks and answers with citations. It returns ErrInvalid for an empty or
// too long question or topK outside 1..MaxTopK, ErrUnavailable when the
// embedder or generator cannot be reached, or the search error.
func (c *Chat) Ask(ctx context.Context, tenantID, question string, topK int) (Answer, error) {
	question = strings.TrimSpace(question)
	switch {
	case question == "":
		return Answer{}, fmt.Errorf("question is empty: %w", ErrInvalid)
	case utf8.RuneCountInString(question) > MaxQuestionLength:
		return Answer{}, fmt.Errorf("question longer than %d characters: %w", MaxQuestionLength, ErrInvalid)
	case topK < 1 || topK > MaxTopK:
		return Answer{}, fmt.Errorf("topK %d outside 1..%d: %w", topK, MaxTopK, ErrInvalid)
	}
	vecs, err := c.embedder.Embed(ctx, []string{question})
	if err != nil {
		return Answer{}, fmt.Errorf("embed question: %w", err)
	}
	passages, err := c.search.Search(ctx, tenantID, vecs[0], topK)
	if err != nil {
		return Answer{}, fmt.Errorf("search tenant %s: %w", tenantID, err)
	}
	if len(passages) == 0 {
		return Answer{Text: NoAnswer, Citations: []Citation{}}, nil
	}
	ans := Answer{Citations: make([]Citation, len(passages))}
	for i, p := range passages {
		ans.Citations[i] = Citation{DocumentID: p.DocumentID, ChunkID: p.ChunkID, Score: p.Score}
	}
	if c.gen != nil {
		text, err := c.gen.Generate(ctx, question, passages)
		if err != nil {
			return Answer{}, fmt.Errorf("generate answer: %w", err)
		}
		ans.Text, ans.Generated = text, true
		return ans, nil
	}
	ans.Text = Extract(question, passages)
	return ans, nil
}

// Extract composes an extractive answer: from each of the best passages,
// the (up to two) sentences sharing most terms with the question, in their
// order in the passage, followed by the number of the passage's citation
// ([1] is the first). A sentence repeated by overlapping chunks appears once.
func Extract(question string, passages []Passage) string {
	q := map[string]bool{}
	for _, t := range Terms(question) {
		q[t] = true
	}
	seen := map[string]bool{}
	var parts []string
	for i, p := range passages[:min(len(passages), passagesInAnswer)] {
		type scored struct {
			pos, score int
			text       string
		}
		var ss []scored
		for pos, s := range Sentences(p.Content) {
			if seen[s] {
				continue
			}
			score := 0
			for _, t := range Terms(s) {
				if matches(q, t) {
					score++
				}
			}
			ss = append(ss, scored{pos, score, s})
		}
		if len(ss) == 0 {
			continue
		}
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].score > ss[b].score })
		pick := ss[:1]
		if len(ss) > 1 && ss[1].score > 0 {
			pick = ss[:2]
		}
		sort.Slice(pick, func(a, b int) bool { return pick[a].pos < pick[b].pos })
		var texts []string
		for _, s := range pick {
			seen[s.text] = true
			texts = append(texts, s.text)
		}
		parts = append(parts, fmt.Sprintf("%s [%d]", strings.Join(texts, " "), i+1))
	}
	return strings.Join(parts, " ")
}

// matches reports whether term is in the question, or shares its first
// five letters with a question term: a crude stemmer, so "parcelar" meets
// "parcelamento" and "certidão" meets "certidões".
func matches(q map[string]bool, term string) bool {
	if q[term] {
		return true
	}
	r := []rune(term)
	if len(r) < 5 {
		return false
	}
	for t := range q {
		if tr := []rune(t); len(tr) >= 5 && string(tr[:5]) == string(r[:5]) {
			return true
		}
	}
	return false
}
