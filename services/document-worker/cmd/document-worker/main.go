// Command document-worker extracts the text of uploaded documents (OCR for
// images and scanned PDFs) and hands it on for knowledge indexing.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/services/document-worker/internal/document"
	"github.com/agora-platform/agora/services/document-worker/internal/httpapi"
	"github.com/agora-platform/agora/services/document-worker/internal/messaging"
	"github.com/agora-platform/agora/services/document-worker/internal/ocr"
	"github.com/agora-platform/agora/services/document-worker/internal/postgres"
	"github.com/agora-platform/agora/services/document-worker/migrations"
)

func main() { host.Main("document-worker", run) }

type config struct {
	host        host.Config
	bucket      string
	tools       ocr.Tools
	concurrency int
	// minLetters is how many letters a document needs to be readable.
	minLetters int
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("document-worker", ":8084", getenv)
	if err != nil {
		return config{}, err
	}
	get := func(k, def string) string { return cmp.Or(getenv(k), def) }
	c := config{
		host:   hc,
		bucket: get("DOCUMENTS_BUCKET", "documents"),
		tools: ocr.Tools{
			Tesseract: get("TESSERACT_BIN", "tesseract"),
			PDFToText: get("PDFTOTEXT_BIN", "pdftotext"),
			PDFToPPM:  get("PDFTOPPM_BIN", "pdftoppm"),
			Languages: get("OCR_LANGUAGES", "por+eng"),
		},
	}
	if c.tools.DPI, err = strconv.Atoi(get("OCR_DPI", "300")); err != nil || c.tools.DPI < 72 {
		return config{}, fmt.Errorf("OCR_DPI %q: want an integer ≥ 72", getenv("OCR_DPI"))
	}
	if c.tools.Timeout, err = time.ParseDuration(get("OCR_TIMEOUT", "2m")); err != nil || c.tools.Timeout <= 0 {
		return config{}, fmt.Errorf("OCR_TIMEOUT %q: want a positive duration", getenv("OCR_TIMEOUT"))
	}
	if c.concurrency, err = strconv.Atoi(get("WORKER_CONCURRENCY", "2")); err != nil || c.concurrency < 1 {
		return config{}, fmt.Errorf("WORKER_CONCURRENCY %q: want an integer ≥ 1", getenv("WORKER_CONCURRENCY"))
	}
	if c.minLetters, err = strconv.Atoi(get("DOCUMENT_MIN_LETTERS", strconv.Itoa(document.DefaultMinLetters))); err != nil || c.minLetters < 1 {
		return config{}, fmt.Errorf("DOCUMENT_MIN_LETTERS %q: want an integer ≥ 1", getenv("DOCUMENT_MIN_LETTERS"))
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, cfg.host, host.Options{
		Migrations: migrations.FS(),
		Relay:      true,
		OpenAPI:    httpapi.OpenAPI,
	}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	objects, err := objstore.New(objstore.Config{Endpoint: cfg.host.S3Endpoint, AccessKey: cfg.host.S3AccessKey, SecretKey: cfg.host.S3SecretKey})
	if err != nil {
		return err
	}
	// The request service normally creates the bucket; a worker started
	// first creates it too. Storage being down now is not fatal: messages
	// wait in the retry tiers until it is back.
	objects.PrepareBucket(ctx, cfg.bucket, h.Log)
	proc := document.NewProcessor(objects, cfg.tools, cfg.bucket, time.Now).
		WithValidator(document.Validator{MinLetters: cfg.minLetters})
	store := postgres.New(h.Outbox)
	if err := messaging.Attach(h, messaging.Deps{Processor: proc, Store: store, Concurrency: cfg.concurrency, Log: h.Log}); err != nil {
		return err
	}
	// No API of its own: the host answers every other path with a 404
	// problem, as on every service, not the mux's plain-text answer.
	return h.Serve(ctx, nil, nil)
}
