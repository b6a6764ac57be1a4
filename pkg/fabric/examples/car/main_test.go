package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

var env = fabrictest.EnvFrom(os.Getenv)

// The example runs to its end against a vhost and schema of its own.
func TestExampleRuns(t *testing.T) {
	vh := fabrictest.NewVhost(t, env)
	db := fabrictest.NewSchema(t, env)
	getenv := func(k string) string {
		switch k {
		case "AMQP_URL":
			return vh.URL
		case "DATABASE_URL":
			return env.DatabaseURL
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	file := filepath.Join("..", "..", "..", "..", "deploy", "topologies", "car.yaml")
	if err := run(ctx, []string{"--topology", file, "--schema", db.Name}, getenv, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range wantLines {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

var wantLines = []string{
	"[processos.analista]    processo.submetido.v1",
	"[processos.notificacao] processo.submetido.v1: applicant notified",
	"[documentos.ocr]        documento.enviado.v1: OCR of documento doc-0001",
	"[integracao.sicar]      cadastro.regular.v1",
	"DLQ car.dlq.documentos.ocr: documento.enviado.v1",
	"PERMANENT_FAILURE",
	"done: 5 events, every consumer served, 1 dead letter(s)",
}
