package privacy_test

import (
	"testing"

	"github.com/agora-platform/agora/services/ai-builder/internal/privacy"
)

func TestMask(t *testing.T) {
	cases := []struct{ in, want string }{
		{"CPF 123.456.789-09 do requerente", "CPF [CPF] do requerente"},
		{"cpf 12345678909.", "cpf [CPF]."},
		{"CPF 123456789-09", "CPF [CPF]"},
		{"escreva para maria.silva+1@prefeitura.gov.br hoje", "escreva para [EMAIL] hoje"},
		{"ligue (11) 98765-4321 ou 11 3456-7890", "ligue [TELEFONE] ou [TELEFONE]"},
		{"telefone +55 11 98765-4321", "telefone [TELEFONE]"},
		{"+351 912 345 678 em Lisboa", "[TELEFONE] em Lisboa"},
		{"rua das Flores, número 120, em 2024", "rua das Flores, número 120, em 2024"},
		{"protocolo 2024-000123", "protocolo 2024-000123"},
		{"", ""},
	}
	for _, c := range cases {
		if got := privacy.Mask(c.in); got != c.want {
			t.Errorf("Mask(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
