package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/broker"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/internal/codec"
	"github.com/agora-platform/agora/pkg/fabric/internal/systems/car"
	"github.com/agora-platform/agora/pkg/fabric/internal/systems/imoveis"
	"github.com/agora-platform/agora/pkg/fabric/registry"
)

var update = flag.Bool("update", false, "rewrite testdata/*/*.envelope.golden")

type system struct {
	name  string
	codec fabric.Codec
	reg   func() (*registry.Registry, error)
}

var systems = []system{
	{"car", codec.CAR{Tenant: "car", Producer: "car"}, car.Registry},
	{"imoveis", codec.Imoveis{Tenant: "imoveis"}, imoveis.Registry},
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %s: %v", b, err)
	}
	return buf.String()
}

// Every wire message in testdata decodes to an envelope the system's
// catalog accepts, encodes back to the same bytes with the seed's routing
// key and AMQP properties, and its internal form is the golden file.
func TestGoldenRoundTrip(t *testing.T) {
	for _, s := range systems {
		reg, err := s.reg()
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join("testdata", s.name, "*.json"))
		seen := map[string]bool{}
		for _, file := range files {
			t.Run(s.name+"/"+filepath.Base(file), func(t *testing.T) {
				wire, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				e, err := s.codec.Decode(amqp.Delivery{Body: wire})
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				seen[e.Type] = true
				if _, err := reg.CheckIncoming(e); err != nil {
					t.Fatalf("CheckIncoming(%s) = %v", e.Type, err)
				}
				key, p, err := s.codec.Encode(e)
				if err != nil {
					t.Fatalf("Encode: %v", err)
				}
				if got, want := compact(t, p.Body), compact(t, wire); got != want {
					t.Errorf("Encode(Decode(wire)) =\n%s\nwant\n%s", got, want)
				}
				wantKey := strings.TrimSuffix(e.Type, ".v1")
				if key != wantKey {
					t.Errorf("routing key = %q, want %q (the type without its version)", key, wantKey)
				}
				if p.MessageId != e.ID || p.CorrelationId != e.CorrelationID || p.ContentType != "application/json" || p.DeliveryMode != amqp.Persistent {
					t.Errorf("properties = id %q corr %q ct %q dm %d", p.MessageId, p.CorrelationId, p.ContentType, p.DeliveryMode)
				}
				switch s.name {
				case "car":
					if p.Type != e.Type {
						t.Errorf("AMQP type = %q, want event_name %q", p.Type, e.Type)
					}
				case "imoveis":
					if p.Type != wantKey || p.Headers[codec.HeaderSchemaVersion] != int32(1) {
						t.Errorf("AMQP type = %q, x-schema-version = %#v; want %q and 1", p.Type, p.Headers[codec.HeaderSchemaVersion], wantKey)
					}
				}
				// Decoding what was sent, properties included, gives the same envelope.
				again, err := s.codec.Decode(amqp.Delivery{Body: p.Body, Headers: p.Headers, Type: p.Type})
				if err != nil || !reflect.DeepEqual(again, e) {
					t.Errorf("Decode(Encode(e)) = %+v, %v; want %+v", again, err, e)
				}
				internal, err := e.Encode()
				if err != nil {
					t.Fatal(err)
				}
				golden := strings.TrimSuffix(file, ".json") + ".envelope.golden"
				if *update {
					var buf bytes.Buffer
					json.Indent(&buf, internal, "", "  ")
					buf.WriteByte('\n')
					if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update)", err)
				}
				if got := compact(t, internal); got != compact(t, want) {
					t.Errorf("envelope = %s\nwant (%s) %s", got, golden, want)
				}
			})
		}
		// A golden file for every type of the catalog.
		for _, d := range reg.All() {
			if !seen[d.Type] {
				t.Errorf("%s: no testdata/%s/ file for %s", s.name, s.name, d.Type)
			}
		}
	}
}

// One system's message is refused by the other's codec, saying what it is
// not and what it is.
func TestForeignFormatsRefused(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	carMsg, imoveisMsg := read("car/processo.submetido.v1.json"), read("imoveis/imovel.recebido.v1.json")
	agoraMsg := []byte(`{"id":"0195f3a8-7c00-7b3e-9d2a-4c5e6f708192","type":"request.submitted.v1","version":"1","occurredAt":"2026-01-15T10:30:00Z","tenantId":"org-a","correlationId":"x","producer":"request","schemaVersion":"1","payload":{}}`)
	for _, tc := range []struct {
		name  string
		c     fabric.Codec
		body  []byte
		wants []string
	}{
		{"imoveis into car", codec.CAR{Tenant: "car"}, imoveisMsg, []string{"not a car envelope: missing event_id", "imoveis envelope (header/data)"}},
		{"agora into car", codec.CAR{Tenant: "car"}, agoraMsg, []string{"not a car envelope: missing event_id", "agora envelope"}},
		{"car into imoveis", codec.Imoveis{Tenant: "imoveis"}, carMsg, []string{"not an imoveis envelope: unexpected field \"event_id\"", "car envelope (snake_case"}},
		{"agora into imoveis", codec.Imoveis{Tenant: "imoveis"}, agoraMsg, []string{"not an imoveis envelope", "agora envelope"}},
		{"car into agora", codec.Agora{}, carMsg, []string{"not an agora envelope: no id and no type", "car envelope"}},
		{"imoveis into agora", codec.Agora{}, imoveisMsg, []string{"not an agora envelope", "imoveis envelope"}},
		{"text into car", codec.CAR{Tenant: "car"}, []byte("hello"), []string{"not a car envelope: not JSON", "not a JSON object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Decode(amqp.Delivery{Body: tc.body})
			var fe *codec.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, envelope.ErrMalformed) {
				t.Fatalf("Decode = %v, want a *FormatError wrapping ErrMalformed", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestImoveisVersionRules(t *testing.T) {
	c := codec.Imoveis{Tenant: "imoveis"}
	wire, err := os.ReadFile("testdata/imoveis/imovel.removido.v1.json")
	if err != nil {
		t.Fatal(err)
	}
	versioned := bytes.Replace(wire, []byte(`"imovel.removido"`), []byte(`"imovel.removido.v1"`), 1)
	if _, err := c.Decode(amqp.Delivery{Body: versioned}); err == nil || !strings.Contains(err.Error(), "carries a version") {
		t.Errorf("Decode(type with version) = %v", err)
	}
	if _, err := c.Decode(amqp.Delivery{Body: wire, Headers: amqp.Table{codec.HeaderSchemaVersion: int32(2)}}); err == nil || !strings.Contains(err.Error(), "disagrees") {
		t.Errorf("Decode(x-schema-version 2, header.version 1) = %v", err)
	}
	if e, err := c.Decode(amqp.Delivery{Body: wire, Headers: amqp.Table{codec.HeaderSchemaVersion: int64(1)}}); err != nil || e.Type != "imovel.removido.v1" || e.TenantID != "imoveis" || e.Producer != "api-ingestao" {
		t.Errorf("Decode = %+v, %v", e, err)
	}
	two := bytes.Replace(wire, []byte(`"version": 1`), []byte(`"version": 2`), 1)
	if e, err := c.Decode(amqp.Delivery{Body: two}); err != nil || e.Type != "imovel.removido.v2" || e.SchemaVersion != "2" {
		t.Errorf("Decode(version 2) = %+v, %v; want type imovel.removido.v2", e, err)
	}
}

func TestFixedTenantAndCausation(t *testing.T) {
	reg, err := car.Registry()
	if err != nil {
		t.Fatal(err)
	}
	c := codec.CAR{Tenant: "car", Producer: "car"}
	root, err := envelope.New("processo.submetido.v1", "car", "car", map[string]string{"processo_id": "p", "requerente_id": "r", "municipio_ibge": "2111300"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := envelope.Derive(root, "processo.aprovado.v1", "car", map[string]string{"processo_id": "p", "municipio_ibge": "2111300"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := broker.EncodeEnvelope(reg, c, "car.events", child)
	if err != nil {
		t.Fatal(err)
	}
	if m.Exchange != "car.events" || m.RoutingKey != "processo.aprovado" || m.Type != "processo.aprovado.v1" {
		t.Errorf("message = %s %s %s", m.Exchange, m.RoutingKey, m.Type)
	}
	got, err := c.Decode(amqp.Delivery{Body: m.Body, Headers: m.Headers})
	if err != nil {
		t.Fatal(err)
	}
	if got.CausationID != root.ID || !reflect.DeepEqual(got.CausationChain, child.CausationChain) || got.TenantID != "car" {
		t.Errorf("decoded causation %q %v tenant %q, want %q %v car", got.CausationID, got.CausationChain, got.TenantID, root.ID, child.CausationChain)
	}
	other := child
	other.TenantID = "org-a"
	if _, err := broker.EncodeEnvelope(reg, c, "car.events", other); err == nil || !strings.Contains(err.Error(), "carries no tenant") {
		t.Errorf("EncodeEnvelope(tenant org-a) = %v, want a refusal", err)
	}
}

// The agora codec writes exactly what a publisher without a codec writes.
func TestAgoraIsTheBuiltInEnvelope(t *testing.T) {
	reg, err := registry.Default()
	if err != nil {
		t.Fatal(err)
	}
	e, err := envelope.New("request.cancelled.v1", "org-a", "request", map[string]any{
		"requestId": "0195f3a8-7c00-7b3e-9d2a-4c5e6f708192", "previousStatus": "submitted", "cancelledBy": "citizen",
		"cancelledAt": time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	want, err := broker.EnvelopeMessage(reg, e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := broker.EncodeEnvelope(reg, codec.Agora{}, "", e)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("agora codec = %+v\nbuilt-in   = %+v", got, want)
	}
	back, err := codec.Agora{}.Decode(amqp.Delivery{Body: got.Body})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Payload, e.Payload) || back.ID != e.ID || !back.OccurredAt.Equal(e.OccurredAt) {
		t.Errorf("Decode = %+v, want %+v", back, e)
	}
}
