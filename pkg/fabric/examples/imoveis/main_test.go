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
	file := filepath.Join("..", "..", "..", "..", "deploy", "topologies", "imoveis.yaml")
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
	"[imoveis.processamento]  imovel.recebido.v1 (lote lote-",
	"[imoveis.enriquecimento] imovel.enriquecer.v1: fetching",
	"[imoveis.processamento]  imovel.enriquecido.v1",
	"[imoveis.remocao]        imovel.removido.v1",
	"done: 4 listings processed",
}
