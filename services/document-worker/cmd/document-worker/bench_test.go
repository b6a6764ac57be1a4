package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/document-worker/doctest"
)

// BenchmarkOCRWorker measures end-to-end throughput of PNG documents (four
// lines of Portuguese at 36 px: a small scanned form) from the upload event
// to document.processed.v1, with one and two competing instances of one
// handler each (OCR is CPU-bound and tesseract runs single-threaded).
// Run: go test ./services/document-worker/cmd/document-worker -run '^$' -bench OCRWorker -benchtime 20x
func BenchmarkOCRWorker(b *testing.B) {
	png, err := doctest.PNG(doctest.Lines, 36)
	if err != nil {
		b.Fatal(err)
	}
	for _, instances := range []int{1, 2} {
		b.Run(fmt.Sprintf("instances=%d", instances), func(b *testing.B) {
			s := newStack(b)
			for range instances {
				s.start(nil)
			}
			tenantID := deploytest.Unique("org-bench-")
			b.ResetTimer()
			start := time.Now()
			ids := make([]string, b.N)
			for i := range b.N {
				ids[i] = s.upload(upload{tenant: tenantID, contentType: "image/png", name: "form.png", data: png})
			}
			fabrictest.Eventually(b, time.Duration(b.N)*30*time.Second, "every document processed", func() bool {
				for _, id := range ids {
					if len(s.find("document.processed.v1", id)) == 0 {
						return false
					}
				}
				return true
			})
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "docs/s")
		})
	}
}
