// Package document is the document worker's domain: what an uploaded
// document is, how its text is extracted, stored and judged (readable? of
// which kind?), and the kinds of failure that decide between retrying and
// dead-lettering. It knows nothing of Postgres or AMQP.
package document

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
)

// Failure kinds. The messaging edge maps them to the fabric's classes:
// ErrUnavailable is transient, the others are permanent (ErrNotFound by
// being of the fabric's kind, which carries its class).
var (
	// ErrForeignObject: the object key is outside the envelope tenant's prefix.
	ErrForeignObject = errors.New("object outside the tenant's prefix")
	// ErrChecksum: the stored bytes do not match the announced sha256.
	ErrChecksum = errors.New("sha256 mismatch")
	// ErrNotFound: the announced object does not exist.
	ErrNotFound = fmt.Errorf("object %w", fabric.ErrNotFound)
	// ErrUnsupported: a content type the worker cannot read.
	ErrUnsupported = errors.New("unsupported content type")
	// ErrCorrupt: the bytes are not a readable file of their type.
	ErrCorrupt = errors.New("corrupt file")
	// ErrUnknownDocument: a reprocessing command names a document the
	// worker never processed (its upload is in the DLQ, or never came).
	ErrUnknownDocument = errors.New("document unknown to the worker")
	// ErrNotReprocessable: the document was processed before the worker
	// kept what reading it again needs.
	ErrNotReprocessable = errors.New("document cannot be reprocessed")
	// ErrUnavailable: storage or an extraction engine is down, missing or
	// timed out; trying again later may succeed.
	ErrUnavailable = errors.New("dependency unavailable")
)

// Uploaded is the reference a document.uploaded.v1 event carries.
type Uploaded struct {
	DocumentID  string
	RequestID   string
	Bucket      string
	ObjectKey   string
	FileName    string
	ContentType string
	Size        int64
	SHA256      string
}

// Method names how text was obtained (the document.processed.v1 enum).
type Method string

// Extraction methods.
const (
	MethodTesseract      Method = "tesseract"
	MethodPDFText        Method = "pdftotext"
	MethodPDFRasterOCR   Method = "pdftoppm+tesseract"
	MethodPlain          Method = "plain"
	pdfTextMinCharsPerPg        = 20
)

// Extraction is extracted text with what is known about how it was read.
type Extraction struct {
	Text   string
	Pages  int
	Method Method
}

// Result is a processed document.
type Result struct {
	Uploaded
	TenantID      string
	TextObjectKey string
	Pages         int
	Characters    int
	Language      string
	Method        Method
	SourceSize    int64
	TextSize      int64
	Duration      time.Duration
	// Verdict is whether the text is readable and which kind of document
	// it appears to be (Validator.Validate).
	Verdict Verdict
}

// Kind is the sniffed kind of a file.
type Kind string

// File kinds the worker reads.
const (
	KindPNG   Kind = "png"
	KindJPEG  Kind = "jpeg"
	KindTIFF  Kind = "tiff"
	KindPDF   Kind = "pdf"
	KindPlain Kind = "plain"
)

// ObjectStore reads and writes objects.
// objstore.New's store is one: a missing object is of fabric.ErrNotFound's
// kind, a store that is down a transient failure.
type ObjectStore interface {
	Get(ctx context.Context, bucket, key string) ([]byte, error)
	// Put stores size bytes of body.
	Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) error
}

// Extractor turns a file of a known kind into text.
type Extractor interface {
	// Extract returns ErrCorrupt, ErrUnavailable or another error.
	Extract(ctx context.Context, kind Kind, data []byte) (Extraction, error)
}

// Processor fetches, checks, extracts and stores a document's text.
type Processor struct {
	store    ObjectStore
	extract  Extractor
	bucket   string
	now      func() time.Time
	validate Validator
}

// NewProcessor returns a Processor reading from and writing to bucket,
// judging documents with the default Validator.
func NewProcessor(store ObjectStore, extract Extractor, bucket string, now func() time.Time) *Processor {
	return &Processor{store: store, extract: extract, bucket: bucket, now: now}
}

// WithValidator makes p judge documents with v; it returns p.
func (p *Processor) WithValidator(v Validator) *Processor {
	p.validate = v
	return p
}

// TenantPrefix is the object-key prefix every object of tenant starts with.
func TenantPrefix(tenantID string) string { return "tenant=" + tenantID + "/" }

// TextKey is where the text of a document is stored.
func TextKey(tenantID, documentID string) string {
	return TenantPrefix(tenantID) + "documents/" + documentID + "/text.txt"
}

// Process reads u's object for tenantID, extracts its text and stores it at
// TextKey. The tenant is the envelope's: a key outside its prefix is
// ErrForeignObject, so no message can make the worker read another tenant's
// object. Errors wrap ErrForeignObject, ErrChecksum, ErrNotFound,
// ErrUnsupported, ErrCorrupt or ErrUnavailable.
func (p *Processor) Process(ctx context.Context, tenantID string, u Uploaded) (Result, error) {
	start := p.now()
	if u.Bucket != "" && u.Bucket != p.bucket {
		return Result{}, fmt.Errorf("document %s: bucket %q is not %q: %w", u.DocumentID, u.Bucket, p.bucket, ErrForeignObject)
	}
	if !strings.HasPrefix(u.ObjectKey, TenantPrefix(tenantID)) || strings.Contains(u.ObjectKey, "..") {
		return Result{}, fmt.Errorf("document %s: key %q for tenant %s: %w", u.DocumentID, u.ObjectKey, tenantID, ErrForeignObject)
	}
	data, err := p.store.Get(ctx, p.bucket, u.ObjectKey)
	if err != nil {
		return Result{}, fmt.Errorf("document %s: fetch: %w", u.DocumentID, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != u.SHA256 {
		return Result{}, fmt.Errorf("document %s: sha256 %s, announced %s: %w", u.DocumentID, got, u.SHA256, ErrChecksum)
	}
	kind, err := Sniff(u.ContentType, data)
	if err != nil {
		return Result{}, fmt.Errorf("document %s: %w", u.DocumentID, err)
	}
	ex, err := p.extract.Extract(ctx, kind, data)
	if err != nil {
		return Result{}, fmt.Errorf("document %s: extract %s: %w", u.DocumentID, kind, err)
	}
	text := strings.TrimSpace(ex.Text)
	key := TextKey(tenantID, u.DocumentID)
	if err := p.store.Put(ctx, p.bucket, key, strings.NewReader(text), int64(len(text)), "text/plain; charset=utf-8"); err != nil {
		return Result{}, fmt.Errorf("document %s: store text: %w", u.DocumentID, err)
	}
	return Result{
		Uploaded: u, TenantID: tenantID, TextObjectKey: key,
		Pages: ex.Pages, Characters: len([]rune(text)), Language: GuessLanguage(text), Method: ex.Method,
		SourceSize: int64(len(data)), TextSize: int64(len(text)), Duration: p.now().Sub(start),
		Verdict: p.validate.Validate(text, ex.Pages),
	}, nil
}

// Sniff decides the file's kind from its first bytes, checked against the
// declared content type: a declared type the bytes contradict is
// ErrCorrupt, a type the worker does not read is ErrUnsupported.
func Sniff(contentType string, data []byte) (Kind, error) {
	declared := strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	var want Kind
	switch declared {
	case "image/png":
		want = KindPNG
	case "image/jpeg", "image/jpg":
		want = KindJPEG
	case "image/tiff":
		want = KindTIFF
	case "application/pdf":
		want = KindPDF
	case "text/plain":
		want = KindPlain
	default:
		return "", fmt.Errorf("%q: %w", declared, ErrUnsupported)
	}
	magic := map[Kind][][]byte{
		KindPNG:  {[]byte("\x89PNG\r\n\x1a\n")},
		KindJPEG: {[]byte("\xff\xd8\xff")},
		KindTIFF: {[]byte("II*\x00"), []byte("MM\x00*")},
		KindPDF:  {[]byte("%PDF-")},
	}
	if want == KindPlain {
		if bytes.IndexByte(data, 0) >= 0 {
			return "", fmt.Errorf("text/plain with NUL bytes: %w", ErrCorrupt)
		}
		return want, nil
	}
	for _, m := range magic[want] {
		if bytes.HasPrefix(data, m) {
			return want, nil
		}
	}
	return "", fmt.Errorf("declared %s but the bytes are not: %w", declared, ErrCorrupt)
}

// NeedsOCR reports whether pdftotext output is too thin to be a text layer
// (a scanned PDF), given the page count.
func NeedsOCR(text string, pages int) bool {
	return len(strings.Join(strings.Fields(text), "")) < pdfTextMinCharsPerPg*max(pages, 1)
}
