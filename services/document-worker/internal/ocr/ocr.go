// Package ocr extracts text with the command-line engines installed on the
// machine: tesseract for images, pdftotext for PDFs with a text layer, and
// pdftoppm + tesseract for scanned PDFs. Each run has a timeout; a missing
// binary or a timeout is document.ErrUnavailable (retry later), input the
// engine cannot read is document.ErrCorrupt.
package ocr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/agora-platform/agora/pkg/fabric/text"
	"image"
	_ "image/jpeg" // decoders for the pre-flight check of images
	_ "image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "golang.org/x/image/tiff"

	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

// Tools locates the engines and bounds their runs.
type Tools struct {
	Tesseract string // path or name on PATH, e.g. "tesseract"
	PDFToText string
	PDFToPPM  string
	Languages string        // tesseract -l, e.g. "por+eng"
	DPI       int           // pdftoppm -r for scanned PDFs
	Timeout   time.Duration // per engine run
}

var _ document.Extractor = Tools{}

// Extract reads data of kind. See the package comment for error kinds.
func (t Tools) Extract(ctx context.Context, kind document.Kind, data []byte) (document.Extraction, error) {
	switch kind {
	case document.KindPlain:
		return document.Extraction{Text: string(data), Pages: 1, Method: document.MethodPlain}, nil
	case document.KindPNG, document.KindJPEG, document.KindTIFF:
		// Go's decoders tell a truncated or garbled image from an engine
		// fault before tesseract runs, so the failure class is certain.
		if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
			return document.Extraction{}, fmt.Errorf("decode %s: %v: %w", kind, err, document.ErrCorrupt)
		}
		dir, cleanup, err := workdir()
		if err != nil {
			return document.Extraction{}, err
		}
		defer cleanup()
		path := filepath.Join(dir, "page."+string(kind))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return document.Extraction{}, fmt.Errorf("write temp image: %w", err)
		}
		text, err := t.tesseract(ctx, path)
		if err != nil {
			return document.Extraction{}, err
		}
		return document.Extraction{Text: text, Pages: 1, Method: document.MethodTesseract}, nil
	case document.KindPDF:
		return t.pdf(ctx, data)
	}
	return document.Extraction{}, fmt.Errorf("kind %q: %w", kind, document.ErrUnsupported)
}

func (t Tools) pdf(ctx context.Context, data []byte) (document.Extraction, error) {
	dir, cleanup, err := workdir()
	if err != nil {
		return document.Extraction{}, err
	}
	defer cleanup()
	path := filepath.Join(dir, "doc.pdf")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return document.Extraction{}, fmt.Errorf("write temp pdf: %w", err)
	}
	out, err := t.run(ctx, t.PDFToText, "-layout", "-enc", "UTF-8", path, "-")
	if err != nil {
		return document.Extraction{}, corruptOnExit(err, 1)
	}
	// pdftotext ends every page with a form feed.
	pages := max(strings.Count(out, "\f"), 1)
	if !document.NeedsOCR(out, pages) {
		return document.Extraction{Text: strings.ReplaceAll(out, "\f", "\n"), Pages: pages, Method: document.MethodPDFText}, nil
	}
	prefix := filepath.Join(dir, "page")
	if _, err := t.run(ctx, t.PDFToPPM, "-r", fmt.Sprint(t.DPI), "-png", path, prefix); err != nil {
		return document.Extraction{}, corruptOnExit(err, 1)
	}
	images, err := filepath.Glob(prefix + "-*.png")
	if err != nil || len(images) == 0 {
		return document.Extraction{}, fmt.Errorf("pdftoppm produced no pages: %w", document.ErrCorrupt)
	}
	// page-1.png … page-10.png: numeric order, not lexical.
	sort.Slice(images, func(i, j int) bool {
		if len(images[i]) != len(images[j]) {
			return len(images[i]) < len(images[j])
		}
		return images[i] < images[j]
	})
	texts := make([]string, 0, len(images))
	for _, img := range images {
		text, err := t.tesseract(ctx, img)
		if err != nil {
			return document.Extraction{}, fmt.Errorf("page %s: %w", filepath.Base(img), err)
		}
		texts = append(texts, strings.TrimSpace(text))
	}
	return document.Extraction{Text: strings.Join(texts, "\n\n"), Pages: len(images), Method: document.MethodPDFRasterOCR}, nil
}

func (t Tools) tesseract(ctx context.Context, path string) (string, error) {
	return t.run(ctx, t.Tesseract, path, "stdout", "-l", t.Languages)
}

// ToolError is a run that exited non-zero.
type ToolError struct {
	Tool   string
	Code   int
	Stderr string
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("%s exited %d: %s", e.Tool, e.Code, strings.TrimSpace(e.Stderr))
}

// run executes tool with args under the timeout and returns its stdout.
func (t Tools) run(ctx context.Context, tool string, args ...string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, tool, args...)
	// One thread per engine run: instances compete for the queue and the
	// machine's cores are shared, so parallelism belongs to the consumers.
	cmd.Env = append(os.Environ(), "OMP_THREAD_LIMIT=1")
	// A killed engine's children could hold the output pipes open; do not
	// wait for them past the timeout.
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	switch {
	case err == nil:
		return stdout.String(), nil
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("%s: %v: %w", tool, err, document.ErrUnavailable)
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s: %w", tool, ctx.Err())
	case rctx.Err() != nil:
		return "", fmt.Errorf("%s: no result within %s: %w", tool, t.Timeout, document.ErrUnavailable)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", &ToolError{Tool: filepath.Base(tool), Code: exit.ExitCode(), Stderr: text.Truncate(stderr.String(), 500)}
	}
	return "", fmt.Errorf("%s: %w", tool, err)
}

// corruptOnExit marks the poppler exit code for "error opening the PDF"
// as a corrupt input; other failures stay unclassified.
func corruptOnExit(err error, code int) error {
	var te *ToolError
	if errors.As(err, &te) && te.Code == code {
		return fmt.Errorf("%w: %w", err, document.ErrCorrupt)
	}
	return err
}

func workdir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "document-worker-*")
	if err != nil {
		return "", nil, fmt.Errorf("temp dir: %v: %w", err, document.ErrUnavailable)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
