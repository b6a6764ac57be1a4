package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agora-platform/agora/deploy/deploytest"
	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
	"github.com/agora-platform/agora/pkg/fabric/fabrictest"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/lake"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/messaging"
	"github.com/agora-platform/agora/services/datalake-ingestion/internal/seal"
)

// citizenUpdated publishes a citizen.updated.v1 of tenant whose citizenId
// is a value found nowhere else.
func (s *stack) citizenUpdated(t *testing.T, tenant string) (envelope.Envelope, string) {
	t.Helper()
	citizenID := deploytest.Unique("CPF-PLAINTEXT-")
	return s.publish(t, "citizen.updated.v1", tenant, map[string]any{"citizenId": citizenID, "changedFields": []string{"address"}}), citizenID
}

// rawObject returns the bytes of key as stored.
func (s *stack) rawObject(t *testing.T, key string) []byte {
	t.Helper()
	obj, err := s.s3.GetObject(context.Background(), s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data
}

// replaceCitizenID rewrites, in the lake, the row of event l with citizenId
// set to sealed: what someone with write access to the bucket could do.
func (s *stack) replaceCitizenID(t *testing.T, l lineage, sealed string) {
	t.Helper()
	rows, err := lake.Decode(s.rawObject(t, l.ObjectKey))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(rows[l.RowOffset].Payload), &p); err != nil {
		t.Fatal(err)
	}
	p["citizenId"] = sealed
	b, _ := json.Marshal(p)
	rows[l.RowOffset].Payload = string(b)
	data, err := lake.Encode(rows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.s3.PutObject(context.Background(), s.bucket, l.ObjectKey, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: messaging.ParquetContentType}); err != nil {
		t.Fatal(err)
	}
}

// storedCitizenID returns the citizenId of event l's row as the lake holds it.
func (s *stack) storedCitizenID(t *testing.T, l lineage) (string, lakeRow) {
	t.Helper()
	row := s.readObject(t, l.ObjectKey)[l.RowOffset]
	var p struct {
		CitizenID     *string  `json:"citizenId"`
		ChangedFields []string `json:"changedFields"`
	}
	if err := json.Unmarshal([]byte(row.Payload), &p); err != nil || p.CitizenID == nil {
		t.Fatalf("payload column of %s: %s (%v), want a citizenId", l.EventID, row.Payload, err)
	}
	if len(p.ChangedFields) != 1 || p.ChangedFields[0] != "address" {
		t.Errorf("payload column of %s: %s; changedFields must be stored as published", l.EventID, row.Payload)
	}
	return *p.CitizenID, row
}

// TestRestrictedFieldsAreSealedInTheLake: citizen.updated.v1 is RESTRICTED
// and its citizenId x-sensitive (lake: encrypt by default). The Parquet
// file in MinIO holds no byte of the citizenId, its payload column a
// sealed value; GET /v1/history gives the published event back; the sealed
// value copied to another tenant's row, or to another event's row, fails
// that tenant's history page with a log naming the event and the field.
func TestRestrictedFieldsAreSealedInTheLake(t *testing.T) {
	s := startStack(t, nil)
	a1, cidA1 := s.citizenUpdated(t, "org-a")
	a2, cidA2 := s.citizenUpdated(t, "org-a")
	b1, cidB1 := s.citizenUpdated(t, "org-b")
	operator := map[string]string{"org-a": s.Token(t, "org-a", "u-1", auth.RoleOperator), "org-b": s.Token(t, "org-b", "u-1", auth.RoleOperator)}
	placed := map[string]lineage{}
	fabrictest.Eventually(t, 20*time.Second, "the lineage of every event", func() bool {
		for _, e := range []envelope.Envelope{a1, a2, b1} {
			if l, code := s.lineage(t, operator[e.TenantID], e.ID); code == http.StatusOK {
				placed[e.ID] = l
			}
		}
		return len(placed) == 3
	})

	sealer, err := seal.New(s.sealKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e         envelope.Envelope
		citizenID string
	}{{a1, cidA1}, {a2, cidA2}, {b1, cidB1}} {
		l := placed[c.e.ID]
		if raw := s.rawObject(t, l.ObjectKey); bytes.Contains(raw, []byte(c.citizenID)) {
			t.Errorf("%s (%d bytes) holds the citizenId %q in clear", l.ObjectKey, len(raw), c.citizenID)
		}
		stored, _ := s.storedCitizenID(t, l)
		if !seal.IsSealed(stored) {
			t.Errorf("citizenId of %s stored as %q, want a sealed value", c.e.ID, stored)
		}
		if v, err := sealer.Open(c.e.TenantID, c.e.ID, "citizenId", stored); err != nil || string(v) != `"`+c.citizenID+`"` {
			t.Errorf("the stored value of %s opens to %s, %v; want %q", c.e.ID, v, err, c.citizenID)
		}
	}

	historyOf := func(tenant string) ([]envelope.Envelope, int) {
		p, code := s.history(t, operator[tenant], "type=citizen.updated.v1")
		var out []envelope.Envelope
		for _, raw := range p.Events {
			e, err := envelope.Decode(raw, 0)
			if err != nil {
				t.Fatalf("history of %s: %v", tenant, err)
			}
			out = append(out, e)
		}
		return out, code
	}
	for tenant, want := range map[string][]envelope.Envelope{"org-a": {a1, a2}, "org-b": {b1}} {
		got, code := historyOf(tenant)
		if code != http.StatusOK || len(got) != len(want) {
			t.Fatalf("history of %s: %d, %d events; want 200 and %d", tenant, code, len(got), len(want))
		}
		for _, g := range got {
			i := 0
			if g.ID != want[0].ID {
				i = 1
			}
			if d := sameEvent(g, want[i]); d != "" {
				t.Errorf("history of %s: event %s: %s", tenant, g.ID, d)
			}
		}
	}

	sealedA1, _ := s.storedCitizenID(t, placed[a1.ID])
	moves := []struct {
		name   string
		target envelope.Envelope // the row the sealed value of a1 is copied into
	}{
		{"to another tenant's row", b1},
		{"to another event's row", a2},
	}
	for _, m := range moves {
		t.Run(m.name, func(t *testing.T) {
			s.replaceCitizenID(t, placed[m.target.ID], sealedA1)
			if _, code := historyOf(m.target.TenantID); code != http.StatusInternalServerError {
				t.Errorf("history of %s with a1's sealed value in the row of %s: %d, want 500", m.target.TenantID, m.target.ID, code)
			}
			want := "event " + m.target.ID + " of tenant " + m.target.TenantID + " (citizen.updated.v1): field citizenId: sealed value does not open"
			fabrictest.Eventually(t, 5*time.Second, "the history's log of the failure", func() bool {
				return strings.Contains(s.svc.Logs(), want)
			})
		})
	}
}

// TestRefusesToStartWithoutItsSealKey: the catalog has a type to seal, so
// a missing or malformed DATALAKE_SEAL_KEY stops the service before it
// connects, with an error naming the variable.
func TestRefusesToStartWithoutItsSealKey(t *testing.T) {
	s := newStack(t)
	tests := []struct{ name, key, want string }{
		{"missing", "", "DATALAKE_SEAL_KEY is not set"},
		{"too short", "c2hvcnQ=", "DATALAKE_SEAL_KEY: want the standard base64 of 32 random bytes"},
		{"not base64", strings.Repeat("zz", 32) + "!", "DATALAKE_SEAL_KEY: want the standard base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := maps.Clone(s.Vars)
			vars["DATALAKE_SEAL_KEY"] = tc.key
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, nil, func(k string) string { return vars[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("run = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
