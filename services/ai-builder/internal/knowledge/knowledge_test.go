package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agora-platform/agora/services/ai-builder/internal/embed"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
)

func TestSentences(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Primeira frase. Segunda frase!  Terceira?", []string{"Primeira frase.", "Segunda frase!", "Terceira?"}},
		{"Valor de R$ 1.200,50 pago.\n\nOutro parágrafo sem ponto", []string{"Valor de R$ 1.200,50 pago.", "Outro parágrafo sem ponto"}},
		{"linha quebrada\nno meio. fim", []string{"linha quebrada no meio.", "fim"}},
		{"   ", nil},
	}
	for _, c := range cases {
		got := knowledge.Sentences(c.in)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Sentences(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	var sb strings.Builder
	for i := range 40 {
		fmt.Fprintf(&sb, "Esta é a frase número %d %s do documento de teste. ", i, strings.Repeat("x", i%7))
	}
	text := sb.String()
	cases := []struct {
		name    string
		opts    knowledge.ChunkOptions
		overlap int
	}{
		{"default target, one sentence of overlap", knowledge.ChunkOptions{OverlapSentences: 1}, 1},
		{"two sentences of overlap", knowledge.ChunkOptions{Target: 300, OverlapSentences: 2}, 2},
		{"no overlap", knowledge.ChunkOptions{Target: 200, OverlapSentences: 0}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chunks := knowledge.Split(text, c.opts)
			target := c.opts.Target
			if target == 0 {
				target = 800
			}
			if len(chunks) < 2 {
				t.Fatalf("Split made %d chunks, want several", len(chunks))
			}
			for i, ch := range chunks {
				if len(ch) > target {
					t.Errorf("chunk %d has %d chars, want ≤ %d", i, len(ch), target)
				}
				if !strings.HasSuffix(ch, ".") {
					t.Errorf("chunk %d does not end on a sentence boundary: %q", i, ch[max(0, len(ch)-30):])
				}
				if i == 0 {
					continue
				}
				prev := knowledge.Sentences(chunks[i-1])
				cur := knowledge.Sentences(ch)
				shared := 0
				for k := 1; k <= min(len(prev), len(cur)); k++ {
					if strings.Join(prev[len(prev)-k:], " ") == strings.Join(cur[:k], " ") {
						shared = k
					}
				}
				if shared != c.overlap {
					t.Errorf("chunks %d and %d share %d sentences, want %d", i-1, i, shared, c.overlap)
				}
			}
			// Every sentence of the text is in some chunk.
			all := strings.Join(chunks, " ")
			for _, s := range knowledge.Sentences(text) {
				if !strings.Contains(all, s) {
					t.Fatalf("sentence %q lost", s)
				}
			}
		})
	}
	if got := knowledge.Split("  \n ", knowledge.ChunkOptions{}); got != nil {
		t.Errorf("Split(blank) = %q, want nil", got)
	}
	long := strings.Repeat("palavra ", 300)
	for _, ch := range knowledge.Split(long, knowledge.ChunkOptions{Target: 200}) {
		if len(ch) > 200 {
			t.Errorf("a long sentence was not cut: chunk of %d chars", len(ch))
		}
	}
}

func TestChunkIDIsStable(t *testing.T) {
	const doc = "0191f0a4-7c1e-7d6a-9f5c-3b8f2f7a1c2d"
	if knowledge.ChunkID(doc, 3) != knowledge.ChunkID(doc, 3) {
		t.Error("ChunkID is not deterministic")
	}
	if knowledge.ChunkID(doc, 3) == knowledge.ChunkID(doc, 4) {
		t.Error("ChunkID repeats across ordinals")
	}
}

func TestFoldAndTerms(t *testing.T) {
	if got := knowledge.Fold("Certidão de Residência, AÇÃO"); got != "certidao de residencia, acao" {
		t.Errorf("Fold = %q", got)
	}
	if got := strings.Join(knowledge.Terms("Qual é o número da padaria?"), " "); got != "numero padaria" {
		t.Errorf("Terms = %q, want %q", got, "numero padaria")
	}
}

type fakeSearch struct {
	tenant   string
	passages []knowledge.Passage
}

func (f *fakeSearch) Search(_ context.Context, tenantID string, _ []float32, k int) ([]knowledge.Passage, error) {
	f.tenant = tenantID
	return f.passages[:min(k, len(f.passages))], nil
}

func TestAskValidates(t *testing.T) {
	chat := knowledge.NewChat(embed.NewHash(64), &fakeSearch{}, nil)
	cases := []struct {
		q    string
		topK int
	}{
		{"", 5}, {"   ", 5}, {"pergunta", 0}, {"pergunta", 21}, {"pergunta", -1}, {strings.Repeat("a", knowledge.MaxQuestionLength+1), 5},
	}
	for _, c := range cases {
		if _, err := chat.Ask(context.Background(), "org-a", c.q, c.topK); !errors.Is(err, knowledge.ErrInvalid) {
			t.Errorf("Ask(%.20q, %d) error = %v, want ErrInvalid", c.q, c.topK, err)
		}
	}
}

func TestAskExtractsCitedSentences(t *testing.T) {
	search := &fakeSearch{passages: []knowledge.Passage{
		{ChunkID: "c1", DocumentID: "d1", Content: "Texto inicial sem relação. A padaria fica na rua das Flores, número 120. Outro assunto.", Score: 0.8},
		{ChunkID: "c2", DocumentID: "d2", Content: "A taxa foi paga em março.", Score: 0.3},
	}}
	chat := knowledge.NewChat(embed.NewHash(64), search, nil)
	ans, err := chat.Ask(context.Background(), "org-a", "Em que rua fica a padaria?", 2)
	if err != nil {
		t.Fatal(err)
	}
	if search.tenant != "org-a" {
		t.Errorf("searched tenant %q, want org-a", search.tenant)
	}
	if !strings.HasPrefix(ans.Text, "A padaria fica na rua das Flores, número 120. [1] A taxa foi paga em março. [2]") {
		t.Errorf("answer = %q, want the padaria sentence cited as [1] first", ans.Text)
	}
	if len(ans.Citations) != 2 || ans.Citations[0].ChunkID != "c1" || ans.Citations[0].DocumentID != "d1" {
		t.Errorf("citations = %+v, want c1/d1 then c2/d2", ans.Citations)
	}
	empty, err := knowledge.NewChat(embed.NewHash(64), &fakeSearch{}, nil).Ask(context.Background(), "org-b", "Em que rua fica a padaria?", 5)
	if err != nil || empty.Text != knowledge.NoAnswer || len(empty.Citations) != 0 {
		t.Errorf("Ask with nothing indexed = %+v, %v, want NoAnswer and no citations", empty, err)
	}
}

func TestExtract(t *testing.T) {
	cases := []struct {
		name, question string
		passages       []knowledge.Passage
		want           string
	}{
		{"two matching sentences keep their order", "Em quantas vezes posso parcelar o imposto predial?",
			[]knowledge.Passage{{Content: "O imposto predial vence em dezembro. O boleto vai pelo correio. Pode parcelar em dez vezes."}},
			"O imposto predial vence em dezembro. Pode parcelar em dez vezes. [1]"},
		{"prefix stemming", "Como pedir o parcelamento?",
			[]knowledge.Passage{{Content: "Nada aqui. O débito pode ser parcelado."}},
			"O débito pode ser parcelado. [1]"},
		{"no match still gives the passage's first sentence", "xyz?",
			[]knowledge.Passage{{Content: "Primeira. Segunda."}},
			"Primeira. [1]"},
		{"overlapping chunks do not repeat a sentence", "Onde fica a padaria?",
			[]knowledge.Passage{{Content: "A padaria fica na rua A. Fim."}, {Content: "A padaria fica na rua A. A padaria abre cedo."}},
			"A padaria fica na rua A. [1] A padaria abre cedo. [2]"},
	}
	for _, c := range cases {
		if got := knowledge.Extract(c.question, c.passages); got != c.want {
			t.Errorf("%s: Extract = %q, want %q", c.name, got, c.want)
		}
	}
}
