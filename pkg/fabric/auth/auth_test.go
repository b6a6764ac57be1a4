package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

func TestVerify(t *testing.T) {
	dev, err := LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeys(context.Background(), dev.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(keys, DevIssuer)
	good := Claims{Subject: "citizen-1", TenantID: "org-a", Roles: []string{RoleCitizen}}
	mint := func(d *DevKeys, c Claims, ttl time.Duration) string {
		tok, err := d.Mint(c, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	valid := mint(dev, good, time.Hour)
	parts := strings.Split(valid, ".")
	noneAlg := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid", valid, true},
		{"expired", mint(dev, good, -2*time.Minute), false},
		{"signed by another key", mint(other, good, time.Hour), false},
		{"alg none", noneAlg, false},
		{"tampered payload", parts[0] + "." + parts[1] + "x." + parts[2], false},
		{"bad tenant", mint(dev, Claims{Subject: "s", TenantID: "Org A", Roles: []string{RoleCitizen}}, time.Hour), false},
		{"no roles", mint(dev, Claims{Subject: "s", TenantID: "org-a"}, time.Hour), false},
		{"garbage", "abc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(tt.token)
			if tt.ok && (err != nil || c.TenantID != "org-a" || c.Subject != "citizen-1" || !c.Has(RoleCitizen)) {
				t.Fatalf("Verify = %+v, %v; want ok", c, err)
			}
			if !tt.ok && !errors.Is(err, errInvalidToken) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalidToken", c, err)
			}
		})
	}
	if _, err := NewVerifier(keys, "someone-else").Verify(valid); err == nil {
		t.Error("Verify with another issuer = nil error")
	}

	// Behind Require, what the request enqueues is the token's subject's
	// doing: the context names them as the actor (outbox.Enqueue reads it).
	var actor envelope.Ref
	h := v.Require(RoleAttendant)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, _ = envelope.ActorFrom(r.Context())
	}))
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer " + valid, 403}, {"Bearer " + mint(dev, Claims{Subject: "a", TenantID: "org-a", Roles: []string{RoleAttendant}}, time.Hour), 200}} {
		rr := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/x", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		h.ServeHTTP(rr, req)
		if rr.Code != c.want {
			t.Errorf("Require(attendant) with %.20q = %d, want %d", c.auth, rr.Code, c.want)
		}
		if rr.Code != 200 && rr.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("error response content type = %q", rr.Header().Get("Content-Type"))
		}
	}
	if want := (envelope.Ref{Type: "USER", ID: "a"}); actor != want {
		t.Errorf("actor in the admitted request's context = %v, want %v", actor, want)
	}
}

// TestVerifiedTokensAreRememberedBriefly: a verified token is served again
// without a check (the key set is emptied to prove it) for at most a
// minute and never past its exp; then it is checked again. The memory is
// bounded.
func TestVerifiedTokensAreRememberedBriefly(t *testing.T) {
	dev, err := LoadOrCreateDevKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeys(context.Background(), dev.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	claims := Claims{Subject: "citizen-1", TenantID: "org-a", Roles: []string{RoleCitizen}}
	tests := []struct {
		name                string
		ttl                 time.Duration
		servedAt, checkedAt time.Duration // after the first Verify
	}{
		{"a minute at most", time.Hour, 59 * time.Second, 61 * time.Second},
		{"never past exp", 30 * time.Second, 29 * time.Second, 31 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := dev.Mint(claims, tt.ttl)
			if err != nil {
				t.Fatal(err)
			}
			v := NewVerifier(keys, DevIssuer)
			start := time.Now()
			v.now = func() time.Time { return start }
			if _, err := v.Verify(tok); err != nil {
				t.Fatalf("first Verify: %v", err)
			}
			v.keys = jwk.NewSet() // from here only the memory can accept it
			v.now = func() time.Time { return start.Add(tt.servedAt) }
			if c, err := v.Verify(tok); err != nil || c.Subject != "citizen-1" {
				t.Fatalf("Verify after %s = %+v, %v; want the remembered claims", tt.servedAt, c, err)
			}
			v.now = func() time.Time { return start.Add(tt.checkedAt) }
			if _, err := v.Verify(tok); !errors.Is(err, errInvalidToken) {
				t.Fatalf("Verify after %s = %v; want it checked again and refused", tt.checkedAt, err)
			}
		})
	}

	v := NewVerifier(keys, DevIssuer)
	for i := range verifiedMax + 10 {
		tok, err := dev.Mint(Claims{Subject: fmt.Sprintf("citizen-%d", i), TenantID: "org-a", Roles: []string{RoleCitizen}}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(v.verified); n > verifiedMax {
		t.Errorf("%d tokens remembered, want at most %d", n, verifiedMax)
	}
}
