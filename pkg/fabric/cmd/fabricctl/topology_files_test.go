package main

import (
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
)

// topologyFile is deploy/topologies/<name>.yaml of the workspace.
func topologyFile(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, "deploy", "topologies", name+".yaml")
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
}

// brokerState is a vhost's exchanges ("name type"), queues and bindings
// ("exchange key -> queue") as the management API lists them, without the
// broker's own (amq.*, the default exchange).
func brokerState(t *testing.T, vh *fabrictest.Vhost) (exchanges, queues, bindings []string) {
	t.Helper()
	v := url.PathEscape(vh.Name)
	var ex []struct{ Name, Type string }
	if err := vh.Mgmt(http.MethodGet, "/api/exchanges/"+v, nil, &ex); err != nil {
		t.Fatal(err)
	}
	for _, e := range ex {
		if e.Name != "" && !strings.HasPrefix(e.Name, "amq.") {
			exchanges = append(exchanges, e.Name+" "+e.Type)
		}
	}
	queues = slices.Collect(maps.Keys(vh.Queues(t)))
	var bs []struct {
		Source          string `json:"source"`
		Destination     string `json:"destination"`
		DestinationType string `json:"destination_type"`
		RoutingKey      string `json:"routing_key"`
	}
	if err := vh.Mgmt(http.MethodGet, "/api/bindings/"+v, nil, &bs); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Source != "" {
			bindings = append(bindings, b.Source+" "+b.RoutingKey+" -> "+b.Destination)
		}
	}
	slices.Sort(exchanges)
	slices.Sort(queues)
	slices.Sort(bindings)
	return exchanges, queues, bindings
}

// retryAdditions are the fabric's retry queues and bindings for queues with
// three tiers on retryExchange: Q.retry.1..3, each bound with its own
// name, and Q bound with its name (the way back).
func retryAdditions(retryExchange string, qs ...string) (queues, bindings []string) {
	for _, q := range qs {
		for _, n := range []string{"1", "2", "3"} {
			r := q + ".retry." + n
			queues = append(queues, r)
			bindings = append(bindings, retryExchange+" "+r+" -> "+r)
		}
		bindings = append(bindings, retryExchange+" "+q+" -> "+q)
	}
	return queues, bindings
}

// After `fabricctl topology apply --file`, the broker holds exactly the
// seed's exchanges, queues and bindings, plus the documented retry
// additions (docs/topologies.md): nothing else.
func TestTopologyFilesApplyTheSeedsNames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		exchanges []string
		queues    []string // the seed's: consumer queues and DLQs
		bindings  []string // the seed's: routing and dead-lettering
		retryEx   string
	}{
		{
			name:      "car",
			exchanges: []string{"car.events topic", "car.dlx topic", "car.retry topic"},
			queues: []string{"processos.analista", "processos.notificacao", "documentos.ocr", "canal.web.mensagens",
				"integracao.sicar", "analytics.metricas", "adapter.whatsapp", "adapter.telegram",
				"car.dlq.processos.analista", "car.dlq.processos.notificacao", "car.dlq.documentos.ocr", "car.dlq.canal.web.mensagens",
				"car.dlq.integracao.sicar", "car.dlq.analytics.metricas", "car.dlq.adapter.whatsapp", "car.dlq.adapter.telegram"},
			bindings: []string{
				"car.events processo.* -> processos.analista",
				"car.events processo.* -> processos.notificacao",
				"car.events documento.* -> documentos.ocr",
				"car.events canal.web.* -> canal.web.mensagens",
				"car.events *.regular -> integracao.sicar",
				"car.events # -> analytics.metricas",
				"car.events canal.mensageria.* -> adapter.whatsapp",
				"car.events canal.mensageria.* -> adapter.telegram",
				"car.dlx processos.analista -> car.dlq.processos.analista",
				"car.dlx processos.notificacao -> car.dlq.processos.notificacao",
				"car.dlx documentos.ocr -> car.dlq.documentos.ocr",
				"car.dlx canal.web.mensagens -> car.dlq.canal.web.mensagens",
				"car.dlx integracao.sicar -> car.dlq.integracao.sicar",
				"car.dlx analytics.metricas -> car.dlq.analytics.metricas",
				"car.dlx adapter.whatsapp -> car.dlq.adapter.whatsapp",
				"car.dlx adapter.telegram -> car.dlq.adapter.telegram",
			},
			retryEx: "car.retry",
		},
		{
			name:      "imoveis",
			exchanges: []string{"imoveis topic", "imoveis.dlx topic", "imoveis.retry topic"},
			queues:    []string{"imoveis.processamento", "imoveis.enriquecimento", "imoveis.remocao", "imoveis.dlq"},
			bindings: []string{
				"imoveis imovel.recebido -> imoveis.processamento",
				"imoveis imovel.atualizado -> imoveis.processamento",
				"imoveis imovel.enriquecido -> imoveis.processamento",
				"imoveis imovel.enriquecer -> imoveis.enriquecimento",
				"imoveis imovel.removido -> imoveis.remocao",
				"imoveis.dlx # -> imoveis.dlq",
			},
			retryEx: "imoveis.retry",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vh := fabrictest.NewVhost(t, env)
			getenv := func(k string) string {
				switch k {
				case "AMQP_URL":
					return vh.URL
				case "RABBITMQ_MGMT_URL":
					return env.MgmtURL
				}
				return ""
			}
			out := fabricctl(t, getenv, "topology", "apply", "--file", topologyFile(t, tc.name))
			if !strings.Contains(out, "applied:") {
				t.Errorf("apply printed %s", out)
			}
			consumerQueues := slices.DeleteFunc(slices.Clone(tc.queues), func(q string) bool {
				return strings.Contains(q, "dlq")
			})
			rq, rb := retryAdditions(tc.retryEx, consumerQueues...)
			wantQ := slices.Sorted(slices.Values(append(slices.Clone(tc.queues), rq...)))
			wantB := slices.Sorted(slices.Values(append(slices.Clone(tc.bindings), rb...)))
			wantE := slices.Sorted(slices.Values(tc.exchanges))
			// Twice: applying is idempotent.
			fabricctl(t, getenv, "topology", "apply", "--file", topologyFile(t, tc.name))
			gotE, gotQ, gotB := brokerState(t, vh)
			if !slices.Equal(gotE, wantE) {
				t.Errorf("exchanges = %q\nwant %q", gotE, wantE)
			}
			if !slices.Equal(gotQ, wantQ) {
				t.Errorf("queues = %q\nwant %q", gotQ, wantQ)
			}
			if !slices.Equal(gotB, wantB) {
				t.Errorf("bindings = %q\nwant %q", gotB, wantB)
			}
		})
	}
}

func TestTopologyShowOfAFile(t *testing.T) {
	out := fabricctl(t, func(string) string { return "" }, "topology", "show", "--file", topologyFile(t, "imoveis"))
	for _, want := range []string{"codec imoveis, fixed tenant imoveis, publishes on imoveis", "dead letters via imoveis.dlx",
		"imoveis.enriquecimento.retry.1", "prefetch 1, paced 2/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("topology show lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "imoveis.dlq "); n != 1 {
		t.Errorf("the shared DLQ is listed %d times, want once", n)
	}
}
