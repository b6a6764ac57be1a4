// Package asyncapi describes the platform's messaging as an AsyncAPI 3.0
// document, generated from the two sources of truth: the message registry
// (types, their JSON Schemas, kind, scope, sensitivity, owner) and the
// topology (exchanges, consumer queues and their bindings). Integrators
// read it instead of the Go code; `fabricctl catalog asyncapi` writes it and
// `make lint` fails when the committed copy differs from what the code
// generates.
package asyncapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agora-platform/agora/pkg/fabric/internal/wire"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/topology"
)

// Version is the AsyncAPI version of the generated document.
const Version = "3.0.0"

// amqpBindingVersion is the version of the AMQP bindings used (0.3.0, the
// one AsyncAPI 3.0 documents).
const amqpBindingVersion = "0.3.0"

// schemaFormat declares the catalog's payload schemas for what they are:
// JSON Schema draft 2020-12, not AsyncAPI's draft-07 superset.
const schemaFormat = "application/schema+json;version=draft-2020-12"

// Options name what the document cannot learn from the registry and the
// topology.
type Options struct {
	// Title goes to the info object. Its version is derived from the
	// content, so any change to a type or a queue changes it.
	Title string
	// Host is the broker, host:port, and Vhost the virtual host.
	Host, Vhost string
}

type object = map[string]any

// Generate returns the AsyncAPI document of reg's types travelling over
// topo, as indented JSON with sorted keys, byte-for-byte the same for the
// same inputs.
func Generate(reg *registry.Registry, topo topology.Description, o Options) ([]byte, error) {
	defs := reg.All()
	channels, operations, messages := object{}, object{}, object{}
	exchangeOf := map[string]topology.Exchange{}
	for _, ex := range topo.Exchanges {
		exchangeOf[ex.Name] = ex
	}
	for _, d := range defs {
		exName, key := topology.Route(d)
		ex, ok := exchangeOf[exName]
		if !ok {
			return nil, fmt.Errorf("asyncapi: %s travels on %s, which the topology does not declare", d.Type, exName)
		}
		msg, err := message(d)
		if err != nil {
			return nil, err
		}
		messages[msgID(d.Type)] = msg
		ch := chanID(d.Type)
		channels[ch] = object{
			"address":     key,
			"title":       d.Type,
			"description": fmt.Sprintf("%s %s on exchange %s, routing key %s.", article(d.Kind), d.Kind, exName, key),
			"messages":    object{msgID(d.Type): ref("#/components/messages/" + msgID(d.Type))},
			"bindings": object{"amqp": object{
				"is":             "routingKey",
				"exchange":       object{"name": exName, "type": ex.Type, "durable": true, "autoDelete": false, "vhost": o.Vhost},
				"bindingVersion": amqpBindingVersion,
			}},
		}
		operations["send-"+msgID(d.Type)] = object{
			"action":   "send",
			"channel":  ref("#/channels/" + ch),
			"summary":  fmt.Sprintf("The %s service sends %s.", d.Owner, d.Type),
			"messages": []any{ref("#/channels/" + ch + "/messages/" + msgID(d.Type))},
			// Persistent, mandatory (an unroutable message is an error, never
			// dropped), with publisher confirms.
			"bindings":       object{"amqp": object{"deliveryMode": 2, "mandatory": true, "timestamp": true, "bindingVersion": amqpBindingVersion}},
			"x-agora-sender": d.Owner,
		}
	}
	for _, c := range topo.Consumers {
		received := map[string]bool{}
		for _, b := range c.Bindings {
			for _, d := range defs {
				exName, key := topology.Route(d)
				if exName == b.Exchange && keyMatches(b.Key, key, exchangeOf[exName].Type == "topic") {
					received[d.Type] = true
				}
			}
		}
		if len(received) == 0 {
			return nil, fmt.Errorf("asyncapi: queue %s binds no type of the catalog", c.Queue)
		}
		types := make([]string, 0, len(received))
		for t := range received {
			types = append(types, t)
		}
		sort.Strings(types)
		ch := "queue." + c.Queue
		chMsgs, opMsgs := object{}, []any{}
		for _, t := range types {
			chMsgs[msgID(t)] = ref("#/components/messages/" + msgID(t))
			opMsgs = append(opMsgs, ref("#/channels/"+ch+"/messages/"+msgID(t)))
		}
		var binds []string
		for _, b := range c.Bindings {
			binds = append(binds, b.Exchange+" "+b.Key)
		}
		tiers := make([]string, 0, len(c.Tiers()))
		for _, d := range c.Tiers() {
			tiers = append(tiers, d.String())
		}
		channels[ch] = object{
			"address": c.Queue,
			"title":   c.Queue,
			"description": fmt.Sprintf("Quorum queue of the %s service, bound to %s. Retry tiers %s (%s.retry.<n>), then %s.",
				c.Service, strings.Join(binds, ", "), strings.Join(tiers, ", "), c.Queue, c.DLQ()),
			"messages": chMsgs,
			"bindings": object{"amqp": object{
				"is":             "queue",
				"queue":          object{"name": c.Queue, "durable": true, "exclusive": false, "autoDelete": false, "vhost": o.Vhost},
				"bindingVersion": amqpBindingVersion,
			}},
			"x-agora-dlq":         c.DLQ(),
			"x-agora-retry-tiers": tiers,
		}
		operations["receive-"+c.Queue] = object{
			"action":           "receive",
			"channel":          ref("#/channels/" + ch),
			"summary":          fmt.Sprintf("The %s service consumes %s with manual acks, competing with its other instances.", c.Service, c.Queue),
			"messages":         opMsgs,
			"x-agora-receiver": c.Service,
			"bindings":         object{"amqp": object{"ack": true, "bindingVersion": amqpBindingVersion}},
		}
	}
	doc := object{
		"asyncapi": Version,
		"info": object{
			"title": o.Title,
			"description": "Every message the platform carries over RabbitMQ, generated from the message catalog " +
				"(pkg/fabric/catalog) and the topology (pkg/fabric/topology). Each body is the platform's JSON " +
				"envelope; its payload is the type's JSON Schema (draft 2020-12). Producers validate against the " +
				"schema as written; consumers accept what it calls compatible (docs/contract-evolution.md).",
		},
		"defaultContentType": "application/json",
		"servers": object{"rabbitmq": object{
			"host":            o.Host,
			"pathname":        "/" + o.Vhost,
			"protocol":        "amqp",
			"protocolVersion": "0.9.1",
			"description":     "RabbitMQ (3.10 and 4.x); TLS (amqps) in deployments.",
			"security":        []any{ref("#/components/securitySchemes/brokerUser")},
		}},
		"channels":   channels,
		"operations": operations,
		"components": object{
			"messages": messages,
			"securitySchemes": object{"brokerUser": object{
				"type":        "userPassword",
				"description": "Each service has its own broker user, allowed only its own queues and the types it publishes (deploy/acl).",
			}},
		},
	}
	body, err := encode(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc["info"].(object)["version"] = "catalog-" + hex.EncodeToString(sum[:6])
	return encode(doc)
}

// encode writes v as indented JSON; maps come out with sorted keys, so the
// same document is the same bytes.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("asyncapi: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// message is the message object of d: the envelope whose payload is d's
// schema, the AMQP properties the publisher sets, and the catalog's
// metadata as extensions.
func message(d registry.Definition) (object, error) {
	var payload object
	if err := json.Unmarshal(d.Schema, &payload); err != nil {
		return nil, fmt.Errorf("asyncapi: schema of %s: %w", d.Type, err)
	}
	// A nested schema keeps the draft of the document it is in.
	delete(payload, "$schema")
	delete(payload, "$id")
	tenant := object{"type": "string", "minLength": 1, "description": "The tenant the message belongs to; every consumer enforces it."}
	required := []any{"id", "type", "version", "occurredAt", "correlationId", "producer", "schemaVersion", "payload"}
	if d.TenantRequired() {
		required = append(required, "tenantId")
	}
	envelope := object{
		"$schema":  "https://json-schema.org/draft/2020-12/schema",
		"type":     "object",
		"required": required,
		"properties": object{
			"id":             object{"type": "string", "format": "uuid", "description": "UUIDv7 written; any RFC 9562 UUID read. The inbox deduplicates on it."},
			"type":           object{"const": d.Type},
			"version":        object{"const": d.Version},
			"occurredAt":     object{"type": "string", "format": "date-time"},
			"tenantId":       tenant,
			"correlationId":  object{"type": "string", "format": "uuid"},
			"causationId":    object{"type": "string", "format": "uuid"},
			"causationChain": object{"type": "array", "items": object{"type": "object", "required": []any{"type", "id"}, "properties": object{"type": object{"type": "string"}, "id": object{"type": "string"}}}},
			"producer":       object{"type": "string"},
			"actor": object{"type": "object", "required": []any{"type", "id"}, "description": "Who acted: a person (USER, by token subject), a service on its own (SYSTEM), a model's decision (AGENT). Optional; set by the outbox when the producer did not.",
				"properties": object{"type": object{"enum": []any{"USER", "SYSTEM", "AGENT"}}, "id": object{"type": "string", "minLength": 1, "maxLength": 200}}},
			"entity": object{"type": "object", "required": []any{"type", "id"}, "description": "The business object the event is about (the outbox's aggregate). Optional.",
				"properties": object{"type": object{"type": "string", "minLength": 1, "maxLength": 200}, "id": object{"type": "string", "minLength": 1, "maxLength": 200}}},
			"schemaVersion": object{"type": "string", "description": "The type's version or a revision of it (\"1\", \"1.2\")."},
			"payload":       payload,
		},
	}
	headers := object{
		"type": "object",
		"properties": object{
			wire.HeaderTenant: object{"type": "string", "description": "Must equal the envelope's tenantId."},
			"traceparent":     object{"type": "string", "description": "W3C trace context."},
			"tracestate":      object{"type": "string"},
		},
	}
	m := object{
		"name":        d.Type,
		"title":       d.Type,
		"summary":     strings.TrimSpace(d.Description),
		"contentType": "application/json",
		"headers":     headers,
		"payload":     object{"schemaFormat": schemaFormat, "schema": envelope},
		"bindings": object{"amqp": object{
			"messageType":     d.Type,
			"contentEncoding": "utf-8",
			"bindingVersion":  amqpBindingVersion,
		}},
		"x-agora-kind":        string(d.Kind),
		"x-agora-domain":      d.Domain,
		"x-agora-owner":       d.Owner,
		"x-agora-scope":       string(d.Scope),
		"x-agora-sensitivity": string(d.Sensitivity),
		"x-agora-replayable":  d.Replayable,
	}
	if len(d.SensitiveFields) > 0 {
		m["x-agora-sensitive-fields"] = d.SensitiveFields
	}
	if d.Successor != "" {
		m["x-agora-successor"] = d.Successor
	}
	return m, nil
}

func ref(to string) object { return object{"$ref": to} }

// chanID and msgID make a type name a component key (AsyncAPI keys allow
// letters, digits, '.', '-' and '_').
func chanID(typ string) string { return typ }
func msgID(typ string) string  { return typ }

func article(k registry.Kind) string {
	if k == registry.KindEvent {
		return "An"
	}
	return "A"
}

// keyMatches reports whether a binding key selects routing key key: equal
// keys, or on a topic exchange a pattern with * (one word) and # (zero or
// more words).
func keyMatches(pattern, key string, topic bool) bool {
	if !topic {
		return pattern == key
	}
	return match(strings.Split(pattern, "."), strings.Split(key, "."))
}

func match(p, k []string) bool {
	switch {
	case len(p) == 0:
		return len(k) == 0
	case p[0] == "#":
		for i := 0; i <= len(k); i++ {
			if match(p[1:], k[i:]) {
				return true
			}
		}
		return false
	case len(k) == 0:
		return false
	case p[0] == "*" || p[0] == k[0]:
		return match(p[1:], k[1:])
	}
	return false
}
