// Command imoveis runs the real-estate listing system (seed 003) on the
// event fabric: its topology file declares the imoveis exchange, the
// processing, enrichment and removal queues and the one imoveis.dlq; its
// messages are the seed's header/data envelope (codec.Imoveis). Received
// listings reach processing, which asks for their detail
// (imovel.enriquecer, through the outbox in its own transaction); the
// detail collector consumes imoveis.enriquecimento paced — prefetch 1 and
// the rate of its topology — and announces imovel.enriquecido, which
// processing handles again; a removed listing reaches removal. It prints
// what happens.
//
//	go run ./pkg/fabric/examples/imoveis --topology deploy/topologies/imoveis.yaml
//
// AMQP_URL and DATABASE_URL default to the local broker and database
// (make infra); the outbox and inbox live in the schema --schema.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/examples/internal/rig"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/ratelimit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "imoveis:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("imoveis", flag.ContinueOnError)
	cfg := rig.Flags(fs, "deploy/topologies/imoveis.yaml", "imoveis_example")
	listings := fs.Int("listings", 4, "how many listings arrive")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.FromEnv(getenv)
	return rig.Run(ctx, *cfg, stdout, func(ctx context.Context, r *rig.Rig) error { return scenario(ctx, r, *listings) })
}

// imovel is the data of imovel.recebido (a full listing).
type imovel struct {
	Codigo         string  `json:"codigo"`
	Fonte          string  `json:"fonte"`
	UF             string  `json:"uf"`
	Cidade         string  `json:"cidade"`
	Bairro         string  `json:"bairro"`
	Endereco       string  `json:"endereco"`
	Preco          float64 `json:"preco"`
	ValorAvaliacao float64 `json:"valorAvaliacao"`
	DescontoPct    float64 `json:"descontoPct"`
	Financiamento  bool    `json:"financiamento"`
	Descricao      string  `json:"descricao"`
	Modalidade     string  `json:"modalidade"`
	Link           string  `json:"link"`
}

// ref is the data of imovel.enriquecer and imovel.removido.
type ref struct {
	Codigo string `json:"codigo"`
	Fonte  string `json:"fonte"`
	Link   string `json:"link,omitempty"`
}

func scenario(ctx context.Context, r *rig.Rig, listings int) error {
	var seen rig.Counter
	enqueue := func(ctx context.Context, tx pgx.Tx, parent envelope.Envelope, typ, producer string, data any) error {
		child, err := envelope.Derive(parent, typ, producer, data)
		if err != nil {
			return err
		}
		var d struct{ Codigo string }
		_ = json.Unmarshal(child.Payload, &d)
		return r.Outbox.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "imovel", ID: d.Codigo}, Envelope: child})
	}
	processing := func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		switch e.Type {
		case "imovel.recebido.v1", "imovel.atualizado.v1":
			_, p, err := fabric.Decode[imovel](ctx, e)
			if err != nil {
				return err
			}
			var lote string
			_ = json.Unmarshal(e.Extensions["loteId"], &lote) // header.loteId, kept as an extension
			r.Printf("[imoveis.processamento]  %s (lote %s): %s %s/%s R$ %.2f normalised, geocoded, scored; asks for its detail", e.Type,
				lote, p.Codigo, p.Cidade, p.UF, p.Preco)
			seen.Add("processed")
			// The request for the detail page, in the same transaction as
			// the listing's effects (and the inbox claim).
			return enqueue(ctx, tx, e, "imovel.enriquecer.v1", "worker-processamento", ref{Codigo: p.Codigo, Fonte: p.Fonte, Link: p.Link})
		case "imovel.enriquecido.v1":
			_, p, err := fabric.Decode[struct{ Codigo, Status string }](ctx, e)
			if err != nil {
				return err
			}
			r.Printf("[imoveis.processamento]  %s: %s detail %s; costs and score recalculated (causation depth %d)", e.Type, p.Codigo, p.Status, len(e.CausationChain))
			seen.Add("recalculated")
		}
		return nil
	}
	last := time.Time{}
	enrichment := func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		_, p, err := fabric.Decode[ref](ctx, e)
		if err != nil {
			return err
		}
		gap := ""
		if !last.IsZero() {
			gap = fmt.Sprintf(" (%v after the previous one)", time.Since(last).Round(10*time.Millisecond))
		}
		last = time.Now()
		r.Printf("[imoveis.enriquecimento] %s: fetching %s%s", e.Type, p.Link, gap)
		seen.Add("enriched")
		return enqueue(ctx, tx, e, "imovel.enriquecido.v1", "coletor-detalhe", map[string]string{"codigo": p.Codigo, "status": "ok"})
	}
	removal := func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		_, p, err := fabric.Decode[ref](ctx, e)
		if err != nil {
			return err
		}
		r.Printf("[imoveis.remocao]        %s: %s (%s) marked unavailable", e.Type, p.Codigo, p.Fonte)
		seen.Add("removed")
		return nil
	}
	if err := r.Consume(ctx, "imoveis.processamento", processing, fabric.ConsumerOptions{}); err != nil {
		return err
	}
	// The collector is paced as its topology says (prefetch 1 and a rate);
	// here with the options spelled out, and one handler so the gaps print
	// in order.
	spec, _ := r.Desc.Consumer("imoveis.enriquecimento")
	r.Printf("imoveis.enriquecimento: prefetch %d, %g detail pages a second (pkg/fabric/ratelimit)", spec.Prefetch, spec.Pace.PerSecond)
	if err := r.Consume(ctx, "imoveis.enriquecimento", enrichment, fabric.ConsumerOptions{
		Prefetch: spec.Prefetch, Pace: ratelimit.NewLocal(spec.Pace.PerSecond, 1), Concurrency: 1}); err != nil {
		return err
	}
	if err := r.Consume(ctx, "imoveis.remocao", removal, fabric.ConsumerOptions{}); err != nil {
		return err
	}

	lote := fmt.Sprintf("lote-%d", time.Now().Unix())
	var batch []envelope.Envelope
	for i := range listings {
		codigo := fmt.Sprintf("14444085018%02d", i)
		e, err := envelope.New("imovel.recebido.v1", r.Desc.Tenant, "api-ingestao", imovel{
			Codigo: codigo, Fonte: "caixa", UF: "SP", Cidade: "ADAMANTINA", Bairro: "VILA JOAQUINA",
			Endereco: "ALAMEDA PADRE ANCHIETA, N. 1159", Preco: 501000 - float64(i)*1000, ValorAvaliacao: 501000,
			DescontoPct: float64(i) * 0.2, Descricao: "Casa", Modalidade: "Leilão SFI - Edital único",
			Link: "https://venda-imoveis.caixa.gov.br/sistema/detalhe-imovel.asp?hdnimovel=" + codigo,
		})
		if err != nil {
			return err
		}
		e.Extensions = map[string]json.RawMessage{"loteId": json.RawMessage(`"` + lote + `"`)}
		if len(batch) > 0 {
			e.CorrelationID = batch[0].CorrelationID
		}
		batch = append(batch, e)
	}
	removed, err := envelope.New("imovel.removido.v1", r.Desc.Tenant, "api-ingestao", ref{Codigo: "1444408500999", Fonte: "caixa"})
	if err != nil {
		return err
	}
	batch = append(batch, removed)
	if err := r.Enqueue(ctx, outbox.Aggregate{Type: "lote", ID: lote}, batch...); err != nil {
		return err
	}
	r.Printf("outbox: %d listings and 1 removal of %s stored in one transaction; the relay publishes them on %s", listings, lote, r.Desc.Events)
	if err := r.Wait(ctx, time.Duration(listings)*time.Second+30*time.Second, "every listing enriched", func() bool {
		return seen.Get("processed") == listings && seen.Get("enriched") == listings &&
			seen.Get("recalculated") == listings && seen.Get("removed") == 1
	}); err != nil {
		return err
	}
	n, err := r.ShowDLQ(ctx, "imoveis.dlq")
	if err != nil {
		return err
	}
	r.Printf("done: %d listings processed, enriched at the collector's pace and recalculated; 1 removed; %d dead letter(s)", listings, n)
	return nil
}
