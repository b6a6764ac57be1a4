// Command car runs CAR (seed 001) on the event fabric: its topology file
// declares car.events, the seed's queues, car.dlx with car.dlq.<queue> and
// retries of 1 s, 5 s and 25 s; its messages are the seed's snake_case
// envelope (codec.CAR). A process event reaches the analyst and
// notification queues, a document event the OCR queue, a regular-status
// event the SICAR integration, everything analytics — published through
// the outbox, consumed through the inbox. The notification fails once and
// comes back after the first retry tier; an unreadable document goes to
// car.dlq.documentos.ocr. It prints what happens.
//
//	go run ./pkg/fabric/examples/car --topology deploy/topologies/car.yaml
//
// AMQP_URL and DATABASE_URL default to the local broker and database
// (make infra); the outbox and inbox live in the schema --schema.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/examples/internal/rig"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "car:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("car", flag.ContinueOnError)
	cfg := rig.Flags(fs, "deploy/topologies/car.yaml", "car_example")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.FromEnv(getenv)
	return rig.Run(ctx, *cfg, stdout, scenario)
}

// payload reads the fields an example prints.
func payload(e envelope.Envelope) map[string]any {
	var p map[string]any
	_ = json.Unmarshal(e.Payload, &p)
	return p
}

func scenario(ctx context.Context, r *rig.Rig) error {
	var seen rig.Counter
	// The queues of the core, each its own consumer (in CAR, its own service).
	handlers := map[string]rig.Handler{
		"processos.analista": func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			tenant, _, _ := fabric.Decode[map[string]any](ctx, e)
			r.Printf("[processos.analista]    %s: processo %v goes to an analyst's queue (tenant %s)", e.Type, payload(e)["processo_id"], tenant)
			seen.Add("analista")
			return nil
		},
		"processos.notificacao": func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			if seen.Add("notificacao-tentativa") == 1 {
				r.Printf("[processos.notificacao] %s: mail server unavailable; retry in 1 s (car.retry → processos.notificacao.retry.1)", e.Type)
				return fabric.Transient(errors.New("mail server unavailable"))
			}
			r.Printf("[processos.notificacao] %s: applicant notified of processo %v", e.Type, payload(e)["processo_id"])
			seen.Add("notificacao")
			return nil
		},
		"documentos.ocr": func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			p := payload(e)
			if p["documento_id"] == "doc-ilegivel" {
				r.Printf("[documentos.ocr]        %s: documento %v is unreadable: permanent failure → car.dlq.documentos.ocr", e.Type, p["documento_id"])
				seen.Add("ocr-dlq")
				return fabric.Permanent(errors.New("document unreadable"))
			}
			r.Printf("[documentos.ocr]        %s: OCR of documento %v", e.Type, p["documento_id"])
			seen.Add("ocr")
			return nil
		},
		"integracao.sicar": func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			r.Printf("[integracao.sicar]      %s: processo %v sent to SICAR", e.Type, payload(e)["processo_id"])
			seen.Add("sicar")
			return nil
		},
		"canal.web.mensagens": func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			r.Printf("[canal.web.mensagens]   %s: mensagem %v shown on the web channel", e.Type, payload(e)["mensagem_id"])
			seen.Add("web")
			return nil
		},
		"analytics.metricas": func(ctx context.Context, _ pgx.Tx, e envelope.Envelope) error {
			r.Printf("[analytics.metricas]    %s counted (routing key %s)", e.Type, strings.TrimSuffix(e.Type, ".v"+e.Version))
			seen.Add("analytics")
			return nil
		},
	}
	for queue, h := range handlers {
		if err := r.Consume(ctx, queue, h, fabric.ConsumerOptions{}); err != nil {
			return err
		}
	}
	r.Printf("adapter.whatsapp and adapter.telegram are declared for the external adapters; nothing here consumes them")

	processo := "MA-2111300-2026-000123"
	var envs []envelope.Envelope
	for _, ev := range []struct {
		typ string
		p   map[string]any
	}{
		{"processo.submetido.v1", map[string]any{"processo_id": processo, "requerente_id": "req-8842", "municipio_ibge": "2111300"}},
		{"documento.enviado.v1", map[string]any{"documento_id": "doc-0001", "processo_id": processo}},
		{"documento.enviado.v1", map[string]any{"documento_id": "doc-ilegivel", "processo_id": processo}},
		{"canal.web.mensagem-recebida.v1", map[string]any{"mensagem_id": "msg-0001", "processo_id": processo}},
		{"cadastro.regular.v1", map[string]any{"processo_id": processo, "municipio_ibge": "2111300"}},
	} {
		e, err := envelope.New(ev.typ, r.Desc.Tenant, "car-api", ev.p)
		if err != nil {
			return err
		}
		if len(envs) > 0 {
			e.CorrelationID = envs[0].CorrelationID
		}
		envs = append(envs, e)
	}
	if err := r.Enqueue(ctx, outbox.Aggregate{Type: "processo", ID: processo}, envs...); err != nil {
		return err
	}
	r.Printf("outbox: %d events stored with processo %s in one transaction; the relay publishes them on %s", len(envs), processo, r.Desc.Events)
	if err := r.Wait(ctx, 30*time.Second, "every consumer", func() bool {
		return seen.Get("analista") == 1 && seen.Get("notificacao") == 1 && seen.Get("ocr") == 1 && seen.Get("ocr-dlq") == 1 &&
			seen.Get("sicar") == 1 && seen.Get("web") == 1 && seen.Get("analytics") == len(envs)
	}); err != nil {
		return err
	}
	const dlq = "car.dlq.documentos.ocr"
	// The handler has returned; the dead letter is in the queue once the
	// broker has it.
	if err := r.Wait(ctx, 10*time.Second, "the dead letter in "+dlq, func() bool {
		n, err := r.Depth(ctx, dlq)
		return err == nil && n >= 1
	}); err != nil {
		return err
	}
	n, err := r.ShowDLQ(ctx, dlq)
	if err != nil {
		return err
	}
	r.Printf("done: %d events, every consumer served, %d dead letter(s)", len(envs), n)
	return nil
}
