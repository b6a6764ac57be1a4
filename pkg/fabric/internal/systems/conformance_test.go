package systems_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/pkg/fabric/inbox"
	"github.com/agora-platform/agora/pkg/fabric/internal/codec"
	"github.com/agora-platform/agora/pkg/fabric/internal/relay"
	"github.com/agora-platform/agora/pkg/fabric/internal/systems"
	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

var testEnv = fabrictest.EnvFrom(os.Getenv)

// system is one topology file applied to a fresh vhost, with a publisher
// speaking its codec on its events exchange.
type system struct {
	*fabrictest.Fabric
	codec fabric.Codec
}

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

func newSystem(t *testing.T, name string) *system {
	t.Helper()
	desc, err := topology.LoadFile(topologyFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.For(desc)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := systems.Registry(desc)
	if err != nil {
		t.Fatal(err)
	}
	vh := fabrictest.NewVhost(t, testEnv)
	conn := vh.Dial(t, func(ctx context.Context, c *amqp.Connection) error { return topology.Apply(ctx, c, desc) })
	pub, err := broker.NewPublisher(conn, reg, broker.PublisherOptions{Codec: c, Exchange: desc.Events})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return &system{Fabric: &fabrictest.Fabric{Vhost: vh, Conn: conn, Reg: reg, Pub: pub, Desc: desc}, codec: c}
}

func (s *system) consumer(t *testing.T, queue string) topology.Consumer {
	t.Helper()
	c, ok := s.Desc.Consumer(queue)
	if !ok {
		t.Fatalf("%s has no queue %s", s.Desc.Name, queue)
	}
	return c
}

// golden returns the envelopes of the codec's golden wire files
// (pkg/fabric/internal/codec/testdata/<system>), as a producer of this system would
// create them now: a fresh UUIDv7, the topology's tenant, the file's
// payload, correlation and producer.
func (s *system) golden(t *testing.T) []envelope.Envelope {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "codec", "testdata", s.Desc.Name, "*.json"))
	if len(files) == 0 {
		t.Fatalf("no golden files for %s", s.Desc.Name)
	}
	var out []envelope.Envelope
	for _, f := range files {
		wire, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.codec.Decode(amqp.Delivery{Body: wire})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		e, err := envelope.New(g.Type, s.Desc.Tenant, g.Producer, g.Payload)
		if err != nil {
			t.Fatal(err)
		}
		e.CorrelationID = g.CorrelationID
		out = append(out, e)
	}
	return out
}

// publishRaw sends body to the system's events exchange with key, as a
// foreign producer would (no codec, no check).
func (s *system) publishRaw(t *testing.T, key string, body []byte) {
	t.Helper()
	ch, err := s.Conn.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), s.Desc.Events, key, false, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: "raw-" + key, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("publish %s: confirmed %v, %v", key, ok, err)
	}
}

// reached drains every consumer queue of the system and returns, per
// queue, the routing keys of the messages it held.
func (s *system) reached(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, c := range s.Desc.Consumers {
		for _, d := range s.Drain(t, c.Queue) {
			out[c.Queue] = append(out[c.Queue], d.RoutingKey)
		}
		slices.Sort(out[c.Queue])
	}
	return out
}

func checkReached(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for q := range want {
		slices.Sort(want[q])
	}
	if !maps.EqualFunc(got, want, slices.Equal[[]string]) {
		var b strings.Builder
		for _, q := range slices.Sorted(maps.Keys(mergeKeys(got, want))) {
			fmt.Fprintf(&b, "\n  %-24s got %v, want %v", q, got[q], want[q])
		}
		t.Errorf("%s: queues reached differ:%s", what, b.String())
	}
}

func mergeKeys(a, b map[string][]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// CAR: every event the catalog has, and every routing pattern the seed
// names, reaches exactly the seed's queues.
func TestCARRouting(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "car")
	for _, e := range s.golden(t) {
		if err := s.Pub.Publish(context.Background(), e); err != nil {
			t.Fatalf("publish %s: %v", e.Type, err)
		}
	}
	all := []string{"cadastro.regular", "canal.mensageria.notificacao", "canal.web.mensagem-recebida", "documento.enviado", "processo.aprovado", "processo.submetido"}
	checkReached(t, "catalog events", s.reached(t), map[string][]string{
		"processos.analista":    {"processo.submetido", "processo.aprovado"},
		"processos.notificacao": {"processo.submetido", "processo.aprovado"},
		"documentos.ocr":        {"documento.enviado"},
		"canal.web.mensagens":   {"canal.web.mensagem-recebida"},
		"integracao.sicar":      {"cadastro.regular"},
		"analytics.metricas":    all,
		"adapter.whatsapp":      {"canal.mensageria.notificacao"},
		"adapter.telegram":      {"canal.mensageria.notificacao"},
	})
	// The seed's patterns themselves, with keys no catalog event has.
	for _, key := range []string{"processo.arquivado", "documento.rejeitado", "canal.web.digitando", "imovel.regular",
		"canal.mensageria.lembrete", "qualquer.coisa", "processo.submetido.v1"} {
		s.publishRaw(t, key, []byte(`{}`))
	}
	checkReached(t, "seed patterns", s.reached(t), map[string][]string{
		"processos.analista":    {"processo.arquivado"},
		"processos.notificacao": {"processo.arquivado"},
		"documentos.ocr":        {"documento.rejeitado"},
		"canal.web.mensagens":   {"canal.web.digitando"},
		"integracao.sicar":      {"imovel.regular"},
		// A versioned key matches only #: why the key carries no version.
		"analytics.metricas": {"processo.arquivado", "documento.rejeitado", "canal.web.digitando", "imovel.regular",
			"canal.mensageria.lembrete", "qualquer.coisa", "processo.submetido.v1"},
		"adapter.whatsapp": {"canal.mensageria.lembrete"},
		"adapter.telegram": {"canal.mensageria.lembrete"},
	})
}

func TestImoveisRouting(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "imoveis")
	for _, e := range s.golden(t) {
		if err := s.Pub.Publish(context.Background(), e); err != nil {
			t.Fatalf("publish %s: %v", e.Type, err)
		}
	}
	checkReached(t, "catalog types", s.reached(t), map[string][]string{
		"imoveis.processamento":  {"imovel.recebido", "imovel.atualizado", "imovel.enriquecido"},
		"imoveis.enriquecimento": {"imovel.enriquecer"},
		"imoveis.remocao":        {"imovel.removido"},
	})
	// A key with a version, or one the contract does not name, reaches no
	// queue.
	for _, key := range []string{"imovel.recebido.v1", "imovel.vendido", "imovel"} {
		s.publishRaw(t, key, []byte(`{}`))
	}
	checkReached(t, "keys the seed does not name", s.reached(t), map[string][]string{})
}

// deadLetters drains queue and returns its messages.
func deadLetters(t *testing.T, s *system, queue string, n int) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	fabrictest.Eventually(t, 20*time.Second, fmt.Sprintf("%d dead letters in %s", n, queue), func() bool {
		out = append(out, s.Drain(t, queue)...)
		return len(out) >= n
	})
	return out
}

func header(d amqp.Delivery, k string) string { return fmt.Sprint(d.Headers[k]) }

// CAR retries after 1 s, 5 s and 25 s (±20 %), then the message is in
// car.dlq.<queue> with the fabric's reason headers.
func TestCARRetryTiersThenDLQ(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "car")
	spec := s.consumer(t, "processos.analista")
	var mu sync.Mutex
	var calls []time.Time
	s.Run(t, spec, func(ctx context.Context, e envelope.Envelope) error {
		if tenant, _, err := fabric.Decode[map[string]any](ctx, e); err != nil || tenant != "car" {
			return fabric.Permanent(fmt.Errorf("tenant %q, %v", tenant, err))
		}
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return fabric.Transient(errors.New("analyst service unavailable"))
	}, fabric.ConsumerOptions{Codec: s.codec})
	golden := s.golden(t)
	e := golden[slices.IndexFunc(golden, func(e envelope.Envelope) bool { return e.Type == "processo.submetido.v1" })]
	if err := s.Pub.Publish(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	fabrictest.Eventually(t, 60*time.Second, "4 attempts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 4
	})
	mu.Lock()
	for i, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second} {
		got := calls[i+1].Sub(calls[i])
		t.Logf("retry %d after %v (tier %v)", i+1, got.Round(time.Millisecond), want)
		// Never early; late by at most a fifth or, on a loaded machine
		// where the broker expires the retry a beat late, a second.
		if got < want*8/10 || got > want+max(want/5, time.Second) {
			t.Errorf("retry %d came %v after attempt %d, want %v (-20%%, +max(20%%, 1s))", i+1, got, i+1, want)
		}
	}
	mu.Unlock()
	dl := deadLetters(t, s, "car.dlq.processos.analista", 1)
	d := dl[0]
	for k, want := range map[string]string{
		wire.HeaderReason: wire.ReasonRetriesExhausted, wire.HeaderConsumer: "processos.analista",
		wire.HeaderAttempts: "4", wire.HeaderErrorClass: "transient", wire.HeaderEventID: e.ID,
		wire.HeaderOrigExchange: "car.events", wire.HeaderOrigRouting: "processo.submetido",
	} {
		if got := header(d, k); got != want {
			t.Errorf("dead letter %s = %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(header(d, wire.HeaderError), "analyst service unavailable") {
		t.Errorf("dead letter error = %q", header(d, wire.HeaderError))
	}
	// The letter is the CAR message as sent, not a fabric envelope.
	if back, err := s.codec.Decode(d); err != nil || back.ID != e.ID || d.Type != "processo.submetido.v1" {
		t.Errorf("dead letter body decodes to %+v, %v (type %q)", back, err, d.Type)
	}
	// One message, one letter: the letter came after the fourth attempt,
	// the last there is, and the DLQ holds nothing else.
	mu.Lock()
	attempts := len(calls)
	mu.Unlock()
	if attempts != 4 {
		t.Errorf("%d attempts, want 4", attempts)
	}
	if n := s.Depth(t, "car.dlq.processos.analista"); n != 0 {
		t.Errorf("%d more letters", n)
	}
}

// Imóveis: a transient failure comes back after the first tier (5 s);
// permanent and invalid failures of two consumers land in the one shared
// imoveis.dlq, each naming its consumer.
func TestImoveisRetryAndSharedDLQ(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "imoveis")
	byType := map[string]envelope.Envelope{}
	for _, e := range s.golden(t) {
		byType[e.Type] = e
	}
	var mu sync.Mutex
	var calls []time.Time
	s.Run(t, s.consumer(t, "imoveis.processamento"), func(ctx context.Context, e envelope.Envelope) error {
		switch e.Type {
		case "imovel.recebido.v1":
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if len(calls) == 1 {
				return fabric.Transient(errors.New("geocoder timeout"))
			}
			return nil
		case "imovel.atualizado.v1":
			return fabric.Permanent(errors.New("listing unknown"))
		}
		return nil
	}, fabric.ConsumerOptions{Codec: s.codec})
	s.Run(t, s.consumer(t, "imoveis.remocao"), func(ctx context.Context, e envelope.Envelope) error {
		return fabric.Invalid(errors.New("codigo not in the source"))
	}, fabric.ConsumerOptions{Codec: s.codec})
	for _, typ := range []string{"imovel.recebido.v1", "imovel.atualizado.v1", "imovel.removido.v1"} {
		if err := s.Pub.Publish(context.Background(), byType[typ]); err != nil {
			t.Fatal(err)
		}
	}
	dl := deadLetters(t, s, "imoveis.dlq", 2)
	got := map[string]string{}
	for _, d := range dl {
		got[header(d, wire.HeaderConsumer)] = header(d, wire.HeaderReason)
		if d.Type != header(d, wire.HeaderOrigRouting) || d.Headers[codec.HeaderSchemaVersion] != int32(1) {
			t.Errorf("dead letter type %q, x-schema-version %#v", d.Type, d.Headers[codec.HeaderSchemaVersion])
		}
	}
	want := map[string]string{"imoveis.processamento": wire.ReasonPermanent, "imoveis.remocao": wire.ReasonHandlerInvalid}
	if !maps.Equal(got, want) {
		t.Errorf("imoveis.dlq consumer → reason = %v, want %v", got, want)
	}
	fabrictest.Eventually(t, 20*time.Second, "imovel.recebido retried", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if d := calls[1].Sub(calls[0]); d < 4*time.Second || d > 6*time.Second {
		t.Errorf("imovel.recebido retried after %v, want 5 s ±20%%", d)
	}
}

// A message in one seed's format reaching the other's consumer is
// dead-lettered at once as INVALID_ENVELOPE, saying what it is not.
func TestForeignFormatDeadLettered(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "codec", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		system, queue, key, dlq string
		body                    []byte
		wants                   []string
	}{
		{"car", "processos.analista", "processo.submetido", "car.dlq.processos.analista",
			read("imoveis/imovel.recebido.v1.json"), []string{"not a car envelope", "imoveis envelope (header/data)"}},
		{"imoveis", "imoveis.processamento", "imovel.recebido", "imoveis.dlq",
			read("car/processo.submetido.v1.json"), []string{"not an imoveis envelope", "car envelope"}},
	} {
		t.Run(tc.system, func(t *testing.T) {
			t.Parallel()
			s := newSystem(t, tc.system)
			called := make(chan struct{}, 1)
			s.Run(t, s.consumer(t, tc.queue), func(context.Context, envelope.Envelope) error {
				called <- struct{}{}
				return nil
			}, fabric.ConsumerOptions{Codec: s.codec})
			s.publishRaw(t, tc.key, tc.body)
			d := deadLetters(t, s, tc.dlq, 1)[0]
			if r := header(d, wire.HeaderReason); r != wire.ReasonInvalidEnvelope {
				t.Errorf("reason = %q, want %s", r, wire.ReasonInvalidEnvelope)
			}
			if a := header(d, wire.HeaderAttempts); a != "1" {
				t.Errorf("attempts = %s, want 1 (no retry)", a)
			}
			for _, w := range tc.wants {
				if !strings.Contains(header(d, wire.HeaderError), w) {
					t.Errorf("error %q lacks %q", header(d, wire.HeaderError), w)
				}
			}
			if string(d.Body) != string(tc.body) {
				t.Errorf("dead letter body changed")
			}
			select {
			case <-called:
				t.Error("the handler ran on a foreign message")
			default:
			}
		})
	}
}

// imoveis.enriquecimento is paced as its topology says: prefetch 1 on the
// broker and no faster than its rate, with no options given.
func TestImoveisEnrichmentIsPaced(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "imoveis")
	spec := s.consumer(t, "imoveis.enriquecimento")
	var mu sync.Mutex
	var calls []time.Time
	s.Run(t, spec, func(ctx context.Context, e envelope.Envelope) error {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return nil
	}, fabric.ConsumerOptions{Codec: s.codec})
	var enrich envelope.Envelope
	for _, e := range s.golden(t) {
		if e.Type == "imovel.enriquecer.v1" {
			enrich = e
		}
	}
	const n = 5
	for range n {
		e, err := envelope.New(enrich.Type, "imoveis", "api-ingestao", enrich.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Pub.Publish(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	var consumers []struct {
		Queue         struct{ Name string } `json:"queue"`
		PrefetchCount int                   `json:"prefetch_count"`
	}
	fabrictest.Eventually(t, 10*time.Second, "the consumer on the broker", func() bool {
		if err := s.Vhost.Mgmt(http.MethodGet, "/api/consumers/"+url.PathEscape(s.Vhost.Name), nil, &consumers); err != nil {
			t.Fatal(err)
		}
		return len(consumers) == 1
	})
	if consumers[0].Queue.Name != spec.Queue || consumers[0].PrefetchCount != 1 {
		t.Errorf("broker consumer = %+v, want prefetch 1 on %s", consumers[0], spec.Queue)
	}
	fabrictest.Eventually(t, 20*time.Second, "every enrichment handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == n
	})
	mu.Lock()
	defer mu.Unlock()
	span, min := calls[n-1].Sub(calls[0]), time.Duration(float64(n-1)/spec.Pace.PerSecond*float64(time.Second))
	t.Logf("%d enrichments in %v at %g/s", n, span.Round(time.Millisecond), spec.Pace.PerSecond)
	if span < min*8/10 {
		t.Errorf("%d enrichments took %v, want at least %v at %g/s", n, span, min, spec.Pace.PerSecond)
	}
}

// The outbox writes a system's wire format: the relay sends the codec's
// body, key and properties, and the inbox makes a redelivery harmless.
func TestOutboxAndInboxWithCodec(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "imoveis")
	db := fabrictest.NewSchema(t, testEnv)
	ob := outbox.New(s.Reg).WithCodec(s.codec, s.Desc.Events)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	relay := relay.New(db.Pool, db.Name, s.Pub, relay.Options{PollInterval: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	byType := map[string]envelope.Envelope{}
	for _, e := range s.golden(t) {
		byType[e.Type] = e
	}
	recebido, removido := byType["imovel.recebido.v1"], byType["imovel.removido.v1"]
	recebido.Extensions = map[string]json.RawMessage{"loteId": json.RawMessage(`"lote-7"`)}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Enqueue(ctx, tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "imovel", ID: "1444408501866"}, Envelope: recebido},
		outbox.Item{Aggregate: outbox.Aggregate{Type: "imovel", ID: "1444408501866"}, Envelope: removido}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fabrictest.WaitOutboxPublished(t, db.Pool, "imovel.removido.v1", "")
	fabrictest.WaitOutboxPublished(t, db.Pool, "imovel.recebido.v1", "")

	// The wire, as the seed lists it.
	got := s.Drain(t, "imoveis.remocao")
	if len(got) != 1 {
		t.Fatalf("imoveis.remocao holds %d messages, want 1", len(got))
	}
	d := got[0]
	if d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent || d.MessageId != removido.ID ||
		d.CorrelationId != removido.CorrelationID || d.Type != "imovel.removido" || d.RoutingKey != "imovel.removido" ||
		d.Headers[codec.HeaderSchemaVersion] != int32(1) {
		t.Errorf("wire = ct %q dm %d id %q corr %q type %q key %q x-schema-version %#v", d.ContentType, d.DeliveryMode,
			d.MessageId, d.CorrelationId, d.Type, d.RoutingKey, d.Headers[codec.HeaderSchemaVersion])
	}
	for k := range d.Headers {
		if strings.HasPrefix(k, "amqp:") || k == wire.HeaderTenant {
			t.Errorf("wire header %s should not be there", k)
		}
	}
	var wire struct {
		Header map[string]any  `json:"header"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(d.Body, &wire); err != nil || wire.Header["type"] != "imovel.removido" || wire.Header["version"] != float64(1) {
		t.Errorf("body = %s, %v", d.Body, err)
	}

	// The processing worker's inbox runs the effect once, though the
	// message arrives twice.
	raw := s.Drain(t, "imoveis.processamento")
	if len(raw) != 1 {
		t.Fatalf("imoveis.processamento holds %d messages, want 1", len(raw))
	}
	for range 2 {
		ch, err := s.Conn.Channel(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := raw[0]
		if err := ch.PublishWithContext(ctx, "imoveis", r.RoutingKey, true, false, amqp.Publishing{ContentType: r.ContentType,
			DeliveryMode: 2, MessageId: r.MessageId, CorrelationId: r.CorrelationId, Type: r.Type, Headers: r.Headers, Body: r.Body}); err != nil {
			t.Fatal(err)
		}
		ch.Close()
	}
	var mu sync.Mutex
	effects, handled := 0, 0
	in := inbox.New(db.Pool, db.Name, "imoveis.processamento", inbox.Options{})
	h := in.Handler(func(ctx context.Context, tx pgx.Tx, e envelope.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		effects++
		if e.TenantID != "imoveis" || string(e.Extensions["loteId"]) != `"lote-7"` || e.Producer != "api-ingestao" {
			return fabric.Permanent(fmt.Errorf("envelope %+v", e))
		}
		return nil
	})
	s.Run(t, s.consumer(t, "imoveis.processamento"), func(ctx context.Context, e envelope.Envelope) error {
		err := h(ctx, e)
		mu.Lock()
		handled++
		mu.Unlock()
		return err
	}, fabric.ConsumerOptions{Codec: s.codec, Concurrency: 1})
	fabrictest.Eventually(t, 20*time.Second, "both deliveries handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if effects != 1 {
		t.Errorf("effect ran %d times, want once", effects)
	}
	if n := s.Depth(t, "imoveis.dlq"); n != 0 {
		t.Errorf("imoveis.dlq holds %d", n)
	}
}
