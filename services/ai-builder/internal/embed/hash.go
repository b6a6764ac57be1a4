// Package embed holds the offline embedder: feature hashing of words, word
// pairs and character n-grams into a fixed number of dimensions. It is
// lexical, not semantic: texts are near when they share words or word
// fragments, and synonyms that share neither are not near at all.
package embed

import (
	"context"
	"hash/fnv"
	"math"

	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
)

// Feature weights: whole words say most, pairs keep some word order, and
// character n-grams survive OCR slips and inflections ("certidão",
// "certidões") at a lower weight because there are many of them.
const (
	wordWeight   = 1.0
	bigramWeight = 0.7
	ngramWeight  = 0.25
	minN, maxN   = 3, 5
)

// Hash is the offline embedder. The zero value is not usable; use NewHash.
type Hash struct {
	dims int
}

var _ knowledge.Embedder = Hash{}

// NewHash returns a hashing embedder producing dims-dimensional unit vectors.
func NewHash(dims int) Hash { return Hash{dims: dims} }

// Name identifies the embedder and its dimension.
func (h Hash) Name() string { return "hash-v1" }

// Embed never fails; it returns one L2-normalised vector per text (all
// zeros for a text without terms).
func (h Hash) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = h.Vector(t)
	}
	return out, nil
}

// Vector embeds one text.
func (h Hash) Vector(text string) []float32 {
	acc := make([]float64, h.dims)
	add := func(prefix byte, feature string, w float64) {
		f := fnv.New64a()
		f.Write([]byte{prefix})
		f.Write([]byte(feature))
		sum := f.Sum64()
		// The sign bit halves the bias that colliding features add.
		if sum>>63 == 1 {
			w = -w
		}
		acc[sum%uint64(h.dims)] += w
	}
	terms := knowledge.Terms(text)
	for i, t := range terms {
		add('w', t, wordWeight)
		if i > 0 {
			add('b', terms[i-1]+" "+t, bigramWeight)
		}
		r := []rune(" " + t + " ")
		for n := minN; n <= maxN; n++ {
			for j := 0; j+n <= len(r); j++ {
				add('c', string(r[j:j+n]), ngramWeight)
			}
		}
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	vec := make([]float32, h.dims)
	if norm == 0 {
		return vec
	}
	norm = math.Sqrt(norm)
	for i, v := range acc {
		vec[i] = float32(v / norm)
	}
	return vec
}
