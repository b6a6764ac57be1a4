package main

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/examples/internal/rigtest"
)

// The example runs to its end against a vhost and schema of its own.
func TestExampleRuns(t *testing.T) { rigtest.Check(t, run, "car", wantLines) }

var wantLines = []string{
	"[processos.analista]    processo.submetido.v1",
	"[processos.notificacao] processo.submetido.v1: applicant notified",
	"[documentos.ocr]        documento.enviado.v1: OCR of documento doc-0001",
	"[integracao.sicar]      cadastro.regular.v1",
	"DLQ car.dlq.documentos.ocr: documento.enviado.v1",
	"PERMANENT_FAILURE",
	"done: 5 events, every consumer served, 1 dead letter(s)",
}
