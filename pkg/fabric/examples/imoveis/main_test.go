package main

import (
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/examples/internal/rigtest"
)

// The example runs to its end against a vhost and schema of its own.
func TestExampleRuns(t *testing.T) { rigtest.Check(t, run, "imoveis", wantLines) }

var wantLines = []string{
	"[imoveis.processamento]  imovel.recebido.v1 (lote lote-",
	"[imoveis.enriquecimento] imovel.enriquecer.v1: fetching",
	"[imoveis.processamento]  imovel.enriquecido.v1",
	"[imoveis.remocao]        imovel.removido.v1",
	"done: 4 listings processed",
}
