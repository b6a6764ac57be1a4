package keyset_test

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/keyset"
)

func TestRoundTripAndRefusals(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 0, 0, 123456000, time.FixedZone("BRT", -3*3600))
	p := keyset.Position{At: at, ID: "01A23212-76FF-7EA1-B6F2-48BDFF90E258"}
	got, err := keyset.Decode(keyset.Encode(p))
	if err != nil || !got.At.Equal(at) || got.At.Location() != time.UTC || got.ID != "01a23212-76ff-7ea1-b6f2-48bdff90e258" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	raw := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, c := range map[string]string{
		"not base64url":  "%%%",
		"not JSON":       raw("hello"),
		"unknown field":  raw(`{"t":"2026-01-01T00:00:00Z","id":"01a23212-76ff-7ea1-b6f2-48bdff90e258","x":1}`),
		"trailing data":  raw(`{"t":"2026-01-01T00:00:00Z","id":"01a23212-76ff-7ea1-b6f2-48bdff90e258"}{}`),
		"zero time":      raw(`{"id":"01a23212-76ff-7ea1-b6f2-48bdff90e258"}`),
		"id not a UUID":  raw(`{"t":"2026-01-01T00:00:00Z","id":"x"}`),
		"another cursor": raw(`{"d":"2026-01-01T00:00:00Z","id":"01a23212-76ff-7ea1-b6f2-48bdff90e258"}`),
	} {
		if _, err := keyset.Decode(c); !errors.Is(err, keyset.ErrCursor) {
			t.Errorf("%s: %v, want ErrCursor", name, err)
		}
	}
}
