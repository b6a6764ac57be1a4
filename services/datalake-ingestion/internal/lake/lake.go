// Package lake defines how events land in the data lake: the Parquet row
// of an event, the partition it belongs to and the object key of a batch
// file. It knows nothing of brokers, databases or S3.
package lake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Row is one event in a Parquet file. The envelope columns are common to
// every type; the request columns are filled for request.* events so
// analysts need not parse the payload for the usual questions.
type Row struct {
	EventID       string    `parquet:"event_id"`
	Type          string    `parquet:"type"`
	Version       string    `parquet:"version"`
	OccurredAt    time.Time `parquet:"occurred_at,timestamp(millisecond)"`
	TenantID      string    `parquet:"tenant_id"`
	CorrelationID string    `parquet:"correlation_id"`
	CausationID   string    `parquet:"causation_id,optional"`
	Producer      string    `parquet:"producer"`
	Payload       string    `parquet:"payload"` // the payload JSON, compact
	// Extensions is a JSON object of the envelope fields this build does
	// not know (added by a newer producer, docs/contract-evolution.md), so the lake keeps
	// every byte of metadata it was sent; null when there are none.
	Extensions string `parquet:"extensions,optional"`
	RequestID  string `parquet:"request_id,optional"`
	ServiceID  string `parquet:"service_id,optional"`
	Channel    string `parquet:"channel,optional"`
	Status     string `parquet:"status,optional"`
}

// RowOf returns the row of env.
func RowOf(env envelope.Envelope) Row {
	var compact bytes.Buffer
	payload := string(env.Payload)
	if json.Compact(&compact, env.Payload) == nil {
		payload = compact.String()
	}
	r := Row{EventID: env.ID, Type: env.Type, Version: env.Version, OccurredAt: env.OccurredAt.UTC(),
		TenantID: env.TenantID, CorrelationID: env.CorrelationID, CausationID: env.CausationID,
		Producer: env.Producer, Payload: payload}
	if len(env.Extensions) > 0 {
		if b, err := json.Marshal(env.Extensions); err == nil { // sorted keys; each value is JSON already
			r.Extensions = string(b)
		}
	}
	if DomainOf(env.Type) == "request" {
		var p struct{ RequestID, ServiceID, Channel, Status string }
		_ = json.Unmarshal(env.Payload, &p) // the fabric validated it; typed columns are a convenience
		r.RequestID, r.ServiceID, r.Channel, r.Status = p.RequestID, p.ServiceID, p.Channel, p.Status
		switch {
		case r.Status != "":
		case env.Type == "request.submitted.v1":
			r.Status = "submitted"
		case env.Type == "request.cancelled.v1":
			r.Status = "cancelled"
		}
	}
	return r
}

// Envelope rebuilds the envelope r was made of (RowOf's inverse) for a
// reader of the lake's history. It carries what the lake keeps: every
// envelope field and the extensions, the payload as compact JSON and
// occurredAt to the millisecond. It cannot carry what the lake does not
// keep: the causation chain (only causationId is stored) and a schema
// revision (schemaVersion is the type's version, "1" for "1.3").
func (r Row) Envelope() (envelope.Envelope, error) {
	e := envelope.Envelope{ID: r.EventID, Type: r.Type, Version: r.Version, OccurredAt: r.OccurredAt.UTC(),
		TenantID: r.TenantID, CorrelationID: r.CorrelationID, CausationID: r.CausationID, Producer: r.Producer,
		SchemaVersion: r.Version, Payload: json.RawMessage(r.Payload)}
	if !json.Valid(e.Payload) {
		return envelope.Envelope{}, fmt.Errorf("row of event %s: payload column is not JSON", r.EventID)
	}
	if r.Extensions != "" {
		if err := json.Unmarshal([]byte(r.Extensions), &e.Extensions); err != nil {
			return envelope.Envelope{}, fmt.Errorf("row of event %s: extensions column: %w", r.EventID, err)
		}
		if len(e.Extensions) == 0 { // "{}" or "null": none
			e.Extensions = nil
		}
	}
	return e, nil
}

// DomainOf returns the domain of a type name: "request.submitted.v1" → "request".
func DomainOf(typ string) string {
	d, _, _ := strings.Cut(typ, ".")
	return d
}

// Partition is one (tenant, domain, type, date) directory of the lake.
type Partition struct {
	TenantID string
	Domain   string
	Type     string
	Date     string // YYYY-MM-DD of occurredAt (UTC)
}

// PartitionOf returns the partition of r.
func PartitionOf(r Row) Partition {
	return Partition{TenantID: r.TenantID, Domain: DomainOf(r.Type), Type: r.Type, Date: r.OccurredAt.UTC().Format("2006-01-02")}
}

// Prefix is the partition's key prefix, ending in "/". Tenant ids are safe
// in keys (envelope.ValidTenant), so one tenant's prefix never holds
// another's objects.
func (p Partition) Prefix() string {
	return fmt.Sprintf("tenant=%s/domain=%s/type=%s/date=%s/", p.TenantID, p.Domain, p.Type, p.Date)
}

// ObjectKey is the key of batchID's file in p.
func (p Partition) ObjectKey(batchID string) string { return p.Prefix() + batchID + ".parquet" }

// ParseObjectKey returns the tenant and batch of a key ObjectKey made, and
// false for any other key.
func ParseObjectKey(key string) (tenantID, batchID string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 || !strings.HasPrefix(parts[0], "tenant=") || !strings.HasSuffix(parts[4], ".parquet") {
		return "", "", false
	}
	tenantID, batchID = strings.TrimPrefix(parts[0], "tenant="), strings.TrimSuffix(parts[4], ".parquet")
	if !envelope.ValidTenant(tenantID) || uuid.Validate(batchID) != nil {
		return "", "", false
	}
	return tenantID, batchID, true
}

// Group is the rows of one partition in one batch, in file order.
type Group struct {
	Partition Partition
	Rows      []Row
}

// GroupRows splits rows by partition, keeping their order within each, and
// returns the groups sorted by prefix so a batch writes deterministically.
func GroupRows(rows []Row) []Group {
	idx := map[Partition]int{}
	var out []Group
	for _, r := range rows {
		p := PartitionOf(r)
		i, ok := idx[p]
		if !ok {
			i = len(out)
			idx[p] = i
			out = append(out, Group{Partition: p})
		}
		out[i].Rows = append(out[i].Rows, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition.Prefix() < out[j].Partition.Prefix() })
	return out
}

// Encode returns rows as a Parquet file (zstd-compressed columns).
func Encode(rows []Row) ([]byte, error) {
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows, parquet.Compression(&parquet.Zstd)); err != nil {
		return nil, fmt.Errorf("encode %d rows as parquet: %w", len(rows), err)
	}
	return buf.Bytes(), nil
}

// Decode reads the rows of a Parquet file written by Encode.
func Decode(data []byte) ([]Row, error) {
	rows, err := parquet.Read[Row](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("decode parquet: %w", err)
	}
	return rows, nil
}
