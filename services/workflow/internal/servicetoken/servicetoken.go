// Package servicetoken mints the workflow service's own bearer tokens, for
// calls it makes to another service on behalf of an event's tenant (the
// agent step's knowledge search). There is no token service on the
// platform: the workflow holds a signing key (AGENT_TOKEN_KEY, a private
// JWK with "alg" and "kid") whose public half is in the JWKS the called
// service verifies with (JWT_KEYS). Tokens name the tenant, live one
// minute, carry only the role the call needs, and say who they are
// (sub "service:workflow").
package servicetoken

import (
	"fmt"
	"os"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// audience is the platform API audience every token carries
// (pkg/fabric/auth verifies it; its constant is not exported).
const audience = "agora-api"

// Subject is the subject of every token the workflow mints.
const Subject = "service:workflow"

// ttl is a token's life: one call's, with room for clock skew.
const ttl = time.Minute

// Minter signs tokens with one key.
type Minter struct {
	key    jwk.Key
	issuer string
	roles  []string
	now    func() time.Time
}

// Load reads the private JWK at path; tokens are issued by issuer (the
// platform's JWT_ISSUER, which verifiers check) with roles.
func Load(path, issuer string, roles ...string) (*Minter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("service token key: %w", err)
	}
	k, err := jwk.ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("service token key %s: %w", path, err)
	}
	if _, ok := k.Algorithm(); !ok {
		return nil, fmt.Errorf("service token key %s: no \"alg\"", path)
	}
	if _, err := jwk.PublicKeyOf(k); err != nil || k.KeyType().String() == "oct" {
		return nil, fmt.Errorf("service token key %s: want an asymmetric private key", path)
	}
	return &Minter{key: k, issuer: issuer, roles: roles, now: time.Now}, nil
}

// Mint returns a token for tenantID.
func (m *Minter) Mint(tenantID string) (string, error) {
	now := m.now()
	tok, err := jwt.NewBuilder().Issuer(m.issuer).Audience([]string{audience}).Subject(Subject).
		IssuedAt(now).NotBefore(now.Add(-time.Second)).Expiration(now.Add(ttl)).
		Claim("tenant_id", tenantID).Claim("roles", m.roles).Build()
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	alg, _ := m.key.Algorithm()
	signed, err := jwt.Sign(tok, jwt.WithKey(alg, m.key))
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	return string(signed), nil
}
