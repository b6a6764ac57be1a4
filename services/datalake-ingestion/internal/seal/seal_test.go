package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustNew(t *testing.T, key []byte) *Sealer {
	t.Helper()
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSealedValueOpensOnlyInItsPlace: a value sealed for one tenant, event
// and field opens there and nowhere else: not for another tenant (whose
// key differs), event or field, not under another master key, and not
// once altered.
func TestSealedValueOpensOnlyInItsPlace(t *testing.T) {
	s := mustNew(t, testKey(1))
	const tenant, event, field = "org-a", "0190c7a8-0000-7000-8000-000000000001", "citizenId"
	value := []byte(`"123.456.789-00"`)
	sealed, err := s.Seal(tenant, event, field, value)
	if err != nil {
		t.Fatal(err)
	}
	if !IsSealed(sealed) || strings.Contains(sealed, "123.456") {
		t.Fatalf("Seal = %q, want %q and no plaintext", sealed, Prefix+"…")
	}
	got, err := s.Open(tenant, event, field, sealed)
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("Open in place = %q, %v; want %q", got, err, value)
	}
	flip := func(v string) string { // alter the last byte of the tag
		raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(v, Prefix))
		raw[len(raw)-1] ^= 1
		return Prefix + base64.RawURLEncoding.EncodeToString(raw)
	}
	tests := []struct {
		name                 string
		sealer               *Sealer
		tenant, event, field string
		sealed               string
	}{
		{"another tenant", s, "org-b", event, field, sealed},
		{"another event", s, tenant, "0190c7a8-0000-7000-8000-000000000002", field, sealed},
		{"another field", s, tenant, event, "changedFields", sealed},
		{"another master key", mustNew(t, testKey(2)), tenant, event, field, sealed},
		{"altered", s, tenant, event, field, flip(sealed)},
		{"truncated", s, tenant, event, field, sealed[:len(sealed)-4]},
		{"not base64url", s, tenant, event, field, Prefix + "!!"},
		{"no prefix", s, tenant, event, field, strings.TrimPrefix(sealed, Prefix)},
		{"another scheme", s, tenant, event, field, "sealed:v2:" + strings.TrimPrefix(sealed, Prefix)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.sealer.Open(tc.tenant, tc.event, tc.field, tc.sealed)
			if !errors.Is(err, ErrOpen) {
				t.Errorf("Open = %q, %v; want ErrOpen", got, err)
			}
		})
	}
}

// TestSealIsRandomised: the same value sealed twice differs, so equal
// values cannot be told apart in the lake.
func TestSealIsRandomised(t *testing.T) {
	s := mustNew(t, testKey(1))
	a, _ := s.Seal("org-a", "e", "f", []byte(`"x"`))
	b, _ := s.Seal("org-a", "e", "f", []byte(`"x"`))
	if a == b {
		t.Errorf("two seals of one value are equal: %s", a)
	}
}

func TestParseKey(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(testKey(7))
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"32 bytes", good, true},
		{"with a newline, as a file holds it", good + "\n", true},
		{"16 bytes", base64.StdEncoding.EncodeToString(testKey(7)[:16]), false},
		{"hex", strings.Repeat("ab", 32), false},
		{"base64url without padding", base64.RawURLEncoding.EncodeToString(testKey(0xfb)), false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseKey(%q) = %x, %v; want ok=%v", tc.in, k, err, tc.ok)
			}
			if tc.ok && !bytes.Equal(k, testKey(7)) {
				t.Errorf("ParseKey = %x", k)
			}
		})
	}
}

// BenchmarkSeal: one field of one event, key derivation included.
func BenchmarkSeal(b *testing.B) {
	s, _ := New(testKey(1))
	for b.Loop() {
		if _, err := s.Seal("org-a", "0190c7a8-0000-7000-8000-000000000001", "citizenId", []byte(`"123.456.789-00"`)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEachTenantHasItsOwnKey: another tenant's key does not open a value
// even with the right additional data, so the tenant is bound twice.
func TestEachTenantHasItsOwnKey(t *testing.T) {
	s := mustNew(t, testKey(1))
	sealed, err := s.Seal("org-a", "e", "f", []byte(`"x"`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sealed, Prefix))
	other, err := s.aead("org-b")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := other.Open(nil, nil, raw, additionalData("org-a", "e", "f")); err == nil {
		t.Errorf("org-b's key opened org-a's value: %s", v)
	}
}
