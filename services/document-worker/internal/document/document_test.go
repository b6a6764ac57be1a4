package document_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

func TestSniff(t *testing.T) {
	cases := []struct {
		contentType string
		data        string
		want        document.Kind
		err         error
	}{
		{"image/png", "\x89PNG\r\n\x1a\n....", document.KindPNG, nil},
		{"image/jpeg", "\xff\xd8\xff\xe0", document.KindJPEG, nil},
		{"image/tiff", "II*\x00rest", document.KindTIFF, nil},
		{"application/pdf", "%PDF-1.7", document.KindPDF, nil},
		{"text/plain; charset=utf-8", "olá", document.KindPlain, nil},
		{"APPLICATION/PDF", "%PDF-1.4", document.KindPDF, nil},
		{"application/pdf", "\x89PNG\r\n\x1a\n", "", document.ErrCorrupt},
		{"image/png", "GIF89a", "", document.ErrCorrupt},
		{"text/plain", "a\x00b", "", document.ErrCorrupt},
		{"application/zip", "PK\x03\x04", "", document.ErrUnsupported},
		{"", "%PDF-1.4", "", document.ErrUnsupported},
	}
	for _, c := range cases {
		got, err := document.Sniff(c.contentType, []byte(c.data))
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("Sniff(%q, %q) = %q, %v, want %q, %v", c.contentType, c.data, got, err, c.want, c.err)
		}
	}
}

func TestGuessLanguage(t *testing.T) {
	cases := []struct{ text, want string }{
		{"O requerente solicita a renovação do alvará de funcionamento da padaria.", "por"},
		{"The applicant asks for the renewal of the permit of the bakery.", "eng"},
		{"12345 67890", "und"},
		{"", "und"},
	}
	for _, c := range cases {
		if got := document.GuessLanguage(c.text); got != c.want {
			t.Errorf("GuessLanguage(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestNeedsOCR(t *testing.T) {
	cases := []struct {
		text  string
		pages int
		want  bool
	}{
		{"\f", 1, true},
		{"  \n \f \f", 2, true},
		{strings.Repeat("palavra ", 10), 1, false},
		{strings.Repeat("palavra ", 6), 2, false},
		{"ab", 3, true},
	}
	for _, c := range cases {
		if got := document.NeedsOCR(c.text, c.pages); got != c.want {
			t.Errorf("NeedsOCR(%q, %d) = %v, want %v", c.text, c.pages, got, c.want)
		}
	}
}

type memStore map[string][]byte

func (m memStore) Get(_ context.Context, bucket, key string) ([]byte, error) {
	b, ok := m[bucket+"/"+key]
	if !ok {
		return nil, document.ErrNotFound
	}
	return b, nil
}

func (m memStore) Put(_ context.Context, bucket, key string, body io.Reader, _ int64, _ string) error {
	data, err := io.ReadAll(body)
	m[bucket+"/"+key] = data
	return err
}

type plainExtractor struct{}

func (plainExtractor) Extract(_ context.Context, _ document.Kind, data []byte) (document.Extraction, error) {
	return document.Extraction{Text: string(data), Pages: 1, Method: document.MethodPlain}, nil
}

// The processor refuses keys outside the envelope tenant's prefix before
// touching storage, whatever the payload says.
func TestProcessorTenantPrefix(t *testing.T) {
	const sha = "a5e5a4e2ab6f0d0bc4e0bdb8e2d8d0e7f2d5b1c5b1f7c0b5c5d1e5c2b7a4f8e1"
	cases := []struct {
		name, bucket, key string
		err               error
	}{
		{"another tenant", "documents", "tenant=org-b/requests/r/documents/d/x.txt", document.ErrForeignObject},
		{"tenant prefix of a longer name", "documents", "tenant=org-ab/x.txt", document.ErrForeignObject},
		{"dot-dot escape", "documents", "tenant=org-a/../tenant=org-b/x.txt", document.ErrForeignObject},
		{"another bucket", "datalake", "tenant=org-a/x.txt", document.ErrForeignObject},
		{"own object, wrong checksum", "documents", "tenant=org-a/x.txt", document.ErrChecksum},
		{"own object missing", "documents", "tenant=org-a/missing.txt", document.ErrNotFound},
	}
	store := memStore{"documents/tenant=org-a/x.txt": []byte("olá"), "documents/tenant=org-b/requests/r/documents/d/x.txt": []byte("segredo")}
	p := document.NewProcessor(store, plainExtractor{}, "documents", time.Now)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Process(context.Background(), "org-a", document.Uploaded{
				DocumentID: "d", Bucket: c.bucket, ObjectKey: c.key, ContentType: "text/plain", SHA256: sha})
			if !errors.Is(err, c.err) {
				t.Errorf("Process(%s) error = %v, want %v", c.key, err, c.err)
			}
		})
	}
}
