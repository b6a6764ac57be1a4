package document_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		valid  bool
		kind   document.DocKind
		reason string // a part of the reason; "" when valid
	}{
		{"empty", "", false, document.DocUnknown, "0 letters"},
		{"ocr noise", "|| ;; 12 3 ~~ . , a b _ 7 8 9 ===", false, document.DocUnknown, "2 letters"},
		{"a few keywords are still unreadable", "RG CPF", false, document.DocUnknown, "5 letters"},
		{"readable, no kind", "O requerente solicita a renovação do alvará de funcionamento da padaria.", true, document.DocUnknown, ""},
		{"identity (pt)", "REPÚBLICA FEDERATIVA DO BRASIL\nCARTEIRA DE IDENTIDADE\nRG 12.345.678-9  CPF 123.456.789-00\nData de nascimento 01/01/1980",
			true, document.DocIdentity, ""},
		{"identity (en)", "IDENTITY CARD\nName: John Smith\nDate of birth: 1980-01-01\nNationality: British", true, document.DocIdentity, ""},
		{"driver's license", "STATE OF CALIFORNIA DRIVER'S LICENSE  DL 1234567  EXP 2030", true, document.DocIdentity, ""},
		{"proof of address (pt)", "COMPROVANTE DE RESIDÊNCIA\nEndereço: Rua das Flores, 120 - Bairro Centro\nCEP 01234-567",
			true, document.DocProofOfAddress, ""},
		{"proof of address, accents lost by the ocr", "Comprovante de residencia  ENDERECO Rua A, 1", true, document.DocProofOfAddress, ""},
		{"certificate of residence (the test fixtures' text)", "Certidão de residência emitida pela prefeitura municipal.\n" +
			"O requerente solicita a renovação do alvará de funcionamento", true, document.DocProofOfAddress, ""},
		{"utility bill with the holder's CPF", "Conta de luz - março\nTitular CPF 123.456.789-00\nEndereço de entrega Rua B, 2 CEP 01000-000",
			true, document.DocProofOfAddress, ""},
		{"utility bill (en)", "Electricity utility bill\nBilling address: 12 High Street", true, document.DocProofOfAddress, ""},
		{"proof of income (pt)", "HOLERITE - Demonstrativo de pagamento\nCPF 123.456.789-00\nSalário base R$ 3.000,00\nINSS 330,00 FGTS 240,00",
			true, document.DocProofOfIncome, ""},
		{"proof of income (en)", "Payslip March 2026\nGross pay 3,000.00\nNet pay 2,400.00", true, document.DocProofOfIncome, ""},
		{"a tie is unknown", "Titular do CPF 123.456.789-00, residente no CEP 01000-000, solicitante", true, document.DocUnknown, ""},
		{"keywords match whole words only", "A percepção do argumento foi discutida na reunião do conselho.", true, document.DocUnknown, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := document.Validate(c.text, 1)
			if v.Valid != c.valid || v.Kind != c.kind {
				t.Errorf("Validate(%q) = valid %v kind %q, want %v %q (checks %+v)", c.text, v.Valid, v.Kind, c.valid, c.kind, v.Checks)
			}
			if len(v.Checks) != 2 || v.Checks[0].Name != document.CheckReadable || v.Checks[1].Name != document.CheckKind {
				t.Fatalf("checks = %+v, want readable then kind", v.Checks)
			}
			if v.Checks[0].Passed != c.valid || v.Checks[1].Passed != (c.kind != document.DocUnknown) {
				t.Errorf("checks = %+v, want readable %v, kind %v", v.Checks, c.valid, c.kind != document.DocUnknown)
			}
			switch {
			case c.valid && v.Reason != "":
				t.Errorf("reason %q for a valid document, want none", v.Reason)
			case !c.valid && !strings.Contains(v.Reason, c.reason):
				t.Errorf("reason %q, want it to say %q", v.Reason, c.reason)
			}
			if again := document.Validate(c.text, 1); !reflect.DeepEqual(again, v) {
				t.Errorf("a second verdict on the same text differs:\n%+v\n%+v", v, again)
			}
		})
	}
}

func TestValidatorMinLetters(t *testing.T) {
	text := strings.Repeat("a", 19) + " 123 !"
	cases := []struct {
		min   int
		valid bool
	}{
		{0, false}, // the default, 20
		{document.DefaultMinLetters, false},
		{19, true},
		{1, true},
		{100, false},
	}
	for _, c := range cases {
		if v := (document.Validator{MinLetters: c.min}).Validate(text, 1); v.Valid != c.valid {
			t.Errorf("MinLetters %d: valid = %v, want %v (%+v)", c.min, v.Valid, c.valid, v.Checks[0])
		}
	}
}

// The processor judges the text it stored.
func TestProcessorCarriesTheVerdict(t *testing.T) {
	const text = "Comprovante de residência: Rua das Flores, 120, CEP 01234-567"
	store := memStore{"documents/tenant=org-a/x.txt": []byte(text)}
	p := document.NewProcessor(store, plainExtractor{}, "documents", time.Now)
	u := document.Uploaded{DocumentID: "d", Bucket: "documents", ObjectKey: "tenant=org-a/x.txt", ContentType: "text/plain",
		SHA256: sha256Hex(text)}
	res, err := p.Process(context.Background(), "org-a", u)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Valid || res.Verdict.Kind != document.DocProofOfAddress {
		t.Errorf("verdict = %+v, want valid proof-of-address", res.Verdict)
	}
	strict, err := document.NewProcessor(store, plainExtractor{}, "documents", time.Now).
		WithValidator(document.Validator{MinLetters: 1000}).Process(context.Background(), "org-a", u)
	if err != nil {
		t.Fatal(err)
	}
	if strict.Verdict.Valid || strict.Verdict.Reason == "" {
		t.Errorf("verdict with MinLetters 1000 = %+v, want invalid with a reason", strict.Verdict)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
