// Package gateway is the external-event gateway (seed 004 §84–86): the one
// way a system outside the platform puts an event on the fabric. An
// external system never publishes to the broker itself; it POSTs a
// CloudEvent (HTTP binding, structured mode) that the gateway
//
//  1. authenticates: the event's source must be a registered source, and
//     the request must carry that source's HMAC-SHA256 signature over the
//     timestamp and the exact body;
//  2. checks for freshness and replay: the signed timestamp must be within
//     the window, and the source may send an event id only once (a ledger
//     row written in the same transaction as the event);
//  3. validates: the type must be an event of the registry the source may
//     send, and the data must pass its JSON Schema;
//  4. resolves the tenant from the source's registration, never from the
//     event (a tenant the event names must agree);
//
// and then enqueues it, as a platform envelope, through the transactional
// outbox.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/gateway/signature"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/internal/security"
	"github.com/agora-platform/agora/pkg/fabric/outbox"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/pkg/fabric/registry"
	"github.com/agora-platform/agora/pkg/fabric/tenant"
)

// Path is where a service mounts the gateway.
const Path = "/v1/external-events"

// defaultWindow is how far a signature's timestamp may be from the
// gateway's clock.
const defaultWindow = 5 * time.Minute

// maxBody bounds an event: the largest body any service accepts.
const maxBody = 256 << 10

// Source is an external system allowed to send events.
type Source struct {
	// ID names the source in logs, the ledger and the envelope's producer.
	ID string `json:"id"`
	// URI is the CloudEvents source attribute its events carry.
	URI string `json:"uri"`
	// TenantID is the tenant every event of the source belongs to.
	TenantID string `json:"tenantId"`
	// Secret is the HMAC key the source signs with (at least 32 bytes).
	Secret string `json:"secret"`
	// Types are the event types the source may send.
	Types []string `json:"types"`
}

// LoadSources reads a JSON array of sources from path and checks each
// against reg.
func LoadSources(path string, reg *registry.Registry) ([]Source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway sources: %w", err)
	}
	var sources []Source
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sources); err != nil {
		return nil, fmt.Errorf("gateway sources %s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, s := range sources {
		switch {
		case s.ID == "" || s.URI == "" || s.TenantID == "":
			return nil, fmt.Errorf("gateway sources %s: every source needs id, uri and tenantId", path)
		case len(s.Secret) < 32:
			return nil, fmt.Errorf("gateway sources %s: source %s: secret must have at least 32 bytes", path, s.ID)
		case seen[s.URI]:
			return nil, fmt.Errorf("gateway sources %s: uri %s registered twice", path, s.URI)
		}
		seen[s.URI] = true
		for _, t := range s.Types {
			d, ok := reg.Lookup(t)
			if !ok || d.Kind != registry.KindEvent {
				return nil, fmt.Errorf("gateway sources %s: source %s: %s is not an event of the catalog", path, s.ID, t)
			}
		}
	}
	return sources, nil
}

// beginner starts transactions; *pgxpool.Pool does.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// enqueuer stores envelopes in the caller's transaction; *outbox.Outbox
// does.
type enqueuer interface {
	Enqueue(ctx context.Context, tx outbox.Tx, items ...outbox.Item) error
}

// gateway accepts external events. Construct it with New.
type gateway struct {
	db      beginner
	outbox  enqueuer
	reg     *registry.Registry
	sources map[string]Source // by URI
	now     func() time.Time
	window  time.Duration
	log     *slog.Logger
}

// New returns a gateway for sources, enqueuing through ob in transactions
// of db, with signatures valid within window of now (DefaultWindow when
// zero).
func New(db beginner, ob enqueuer, reg *registry.Registry, sources []Source, now func() time.Time, window time.Duration, log *slog.Logger) *gateway {
	g := &gateway{db: db, outbox: ob, reg: reg, sources: map[string]Source{}, now: now, window: window, log: log}
	if g.window <= 0 {
		g.window = defaultWindow
	}
	for _, s := range sources {
		g.sources[s.URI] = s
	}
	return g
}

// cloudEvent is a CloudEvent in structured mode. Extension attributes
// other than tenantid are kept by nobody: the envelope carries what the
// platform knows.
type cloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            *time.Time      `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
	TenantID        string          `json:"tenantid"`
}

// accepted is the answer to an accepted event.
type accepted struct {
	EventID string `json:"eventId"` // the platform envelope's id
	Type    string `json:"type"`
}

// ServeHTTP accepts one event: 202 with its envelope id; 401 for an
// unknown source, a bad or missing signature or a stale timestamp; 403 for
// a type the source may not send or a tenant not its own; 409 for an id
// the source sent before; 415 and 400 for bodies that are not CloudEvents;
// 422 for an unknown type or data its schema refuses. Problems are RFC
// 9457 and never say which secret or tenant was expected.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem.Error(w, r, http.StatusMethodNotAllowed, "POST a CloudEvent")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != signature.ContentType {
		problem.Error(w, r, http.StatusUnsupportedMediaType, "the body must be a CloudEvent in structured mode ("+signature.ContentType+")")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		problem.Error(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("an event is at most %d bytes", maxBody))
		return
	}
	var ce cloudEvent
	if err := json.Unmarshal(body, &ce); err != nil {
		problem.Error(w, r, http.StatusBadRequest, "the body is not a CloudEvent: "+err.Error())
		return
	}
	if missing := ce.missing(); len(missing) > 0 {
		problem.Write(w, r, problem.Details{Status: http.StatusBadRequest, Detail: "not a CloudEvents 1.0 event",
			Errors: map[string]any{"attributes": "required: " + strings.Join(missing, ", ")}})
		return
	}
	src, ok := g.sources[ce.Source]
	if !ok {
		g.refuse(w, r, http.StatusUnauthorized, "unknown source", ce)
		return
	}
	if err := g.verify(src, r.Header.Get(signature.Header), body); err != nil {
		g.refuse(w, r, http.StatusUnauthorized, err.Error(), ce)
		return
	}
	if ce.TenantID != "" && ce.TenantID != src.TenantID {
		security.CrossTenant(r.Context(), "gateway")
		g.refuse(w, r, http.StatusForbidden, "the event names a tenant that is not its source's", ce)
		return
	}
	def, ok := g.reg.Lookup(ce.Type)
	if !ok || def.Kind != registry.KindEvent {
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: "unknown event type",
			Errors: map[string]any{"type": fmt.Sprintf("%q is not an event of the catalog", ce.Type)}})
		return
	}
	if !slices.Contains(src.Types, ce.Type) {
		security.CapabilityRefused(r.Context(), "gateway:event-type")
		g.refuse(w, r, http.StatusForbidden, "the source may not send "+ce.Type, ce)
		return
	}
	if err := g.reg.ValidatePayload(ce.Type, ce.Data); err != nil {
		problem.Write(w, r, problem.Details{Status: http.StatusUnprocessableEntity, Detail: "data does not match the type's schema",
			Errors: map[string]any{"data": err.Error()}})
		return
	}
	env, err := envelope.New(ce.Type, src.TenantID, "gateway/"+src.ID, ce.Data)
	if err != nil {
		g.log.ErrorContext(r.Context(), "external event", "err", err)
		problem.Fail(w, r, nil, err)
		return
	}
	if ce.Time != nil {
		env.OccurredAt = ce.Time.UTC()
	}
	err = tenant.Tx(r.Context(), g.db, src.TenantID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(r.Context(), `INSERT INTO gateway_received (source_id, event_id, tenant_id, envelope_id, event_type)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, src.ID, ce.ID, src.TenantID, env.ID, ce.Type)
		if err != nil {
			return fmt.Errorf("gateway: ledger: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errReplay
		}
		return g.outbox.Enqueue(r.Context(), tx, outbox.Item{Aggregate: outbox.Aggregate{Type: "external-event", ID: src.ID}, Envelope: env})
	})
	switch {
	case errors.Is(err, errReplay):
		g.refuse(w, r, http.StatusConflict, "this source sent event "+ce.ID+" before", ce)
		return
	case err != nil:
		g.log.ErrorContext(r.Context(), "external event", "err", err)
		problem.Fail(w, r, nil, err)
		return
	}
	g.log.InfoContext(r.Context(), "external event accepted", "source", src.ID, "id", ce.ID, "type", ce.Type, "event", env.ID)
	httpjson.Write(w, http.StatusAccepted, accepted{EventID: env.ID, Type: env.Type})
}

var errReplay = errors.New("replayed event")

func (ce cloudEvent) missing() []string {
	var out []string
	for _, a := range []struct{ name, v string }{{"specversion", ce.SpecVersion}, {"id", ce.ID}, {"source", ce.Source}, {"type", ce.Type}} {
		if a.v == "" {
			out = append(out, a.name)
		}
	}
	if ce.SpecVersion != "" && ce.SpecVersion != "1.0" {
		out = append(out, "specversion 1.0")
	}
	if len(ce.Data) == 0 {
		out = append(out, "data")
	}
	if ce.DataContentType != "" && ce.DataContentType != "application/json" {
		out = append(out, "datacontenttype application/json")
	}
	return out
}

// verify checks header, "t=<unix>,v1=<hex>", against body and src's
// secret, and that t is within the window.
func (g *gateway) verify(src Source, header string, body []byte) error {
	at, err := signature.Check(src.Secret, header, body)
	if err != nil {
		return err
	}
	if d := g.now().Sub(at); d > g.window || d < -g.window {
		return fmt.Errorf("stale signature: its timestamp is %s from the gateway's clock, beyond %s", d.Round(time.Second), g.window)
	}
	return nil
}

// refuse answers status with detail and logs the refusal: refusals are
// security events an operator may need to trace.
func (g *gateway) refuse(w http.ResponseWriter, r *http.Request, status int, detail string, ce cloudEvent) {
	// A source signs, it sends no bearer: its refusals are charged to the
	// source it claims (package internal/security).
	security.Presented(r.Context(), "gateway source "+ce.Source)
	g.log.WarnContext(r.Context(), "external event refused", "status", status, "reason", detail, "source", ce.Source, "id", ce.ID, "type", ce.Type)
	problem.Error(w, r, status, detail)
}
