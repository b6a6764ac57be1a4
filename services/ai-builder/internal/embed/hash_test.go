package embed_test

import (
	"context"
	"math"
	"testing"

	"github.com/agora-platform/agora/services/ai-builder/internal/embed"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestHashVectors(t *testing.T) {
	h := embed.NewHash(384)
	vecs, err := h.Embed(context.Background(), []string{
		"Certidão de residência emitida pela prefeitura municipal.",
		"certidao de residencia emitida pela prefeitura municipal",
		"A prefeitura emitiu a certidão de residência.",
		"O imposto predial vence em dezembro.",
		"",
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs[:4] {
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if len(v) != 384 || math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d: %d dims, squared norm %v, want 384 and 1", i, len(v), n)
		}
	}
	cases := []struct {
		name string
		a, b int
		min  float64
		max  float64
	}{
		{"accents and punctuation do not matter", 0, 1, 0.999, 1.001},
		{"shared words are near", 0, 2, 0.4, 0.999},
		{"unrelated text is far", 0, 3, -0.2, 0.2},
	}
	for _, c := range cases {
		if got := cosine(vecs[c.a], vecs[c.b]); got < c.min || got > c.max {
			t.Errorf("%s: cosine = %.3f, want in [%.2f, %.2f]", c.name, got, c.min, c.max)
		}
	}
	for _, x := range vecs[4] {
		if x != 0 {
			t.Fatal("empty text must embed to the zero vector")
		}
	}
	again := h.Vector("Certidão de residência emitida pela prefeitura municipal.")
	for i := range again {
		if again[i] != vecs[0][i] {
			t.Fatal("embedding is not deterministic")
		}
	}
}
