package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// DevIssuer is the issuer of local-development tokens.
const DevIssuer = "agora-dev"

// DevKeys is a local-development signing key (Ed25519). NOT for production:
// production tokens come from the identity provider named by JWT_ISSUER.
type DevKeys struct {
	private jwk.Key
	// JWKSPath is the public key set services read through JWT_KEYS.
	JWKSPath string
}

// LoadOrCreateDevKeys reads dir/dev-signing-key.json, creating it and
// dir/jwks.json on first use.
func LoadOrCreateDevKeys(dir string) (*DevKeys, error) {
	privPath := filepath.Join(dir, "dev-signing-key.json")
	pubPath := filepath.Join(dir, "jwks.json")
	data, err := os.ReadFile(privPath)
	if errors.Is(err, fs.ErrNotExist) {
		return createDevKeys(dir, privPath, pubPath)
	}
	if err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	k, err := jwk.ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("dev keys: %s: %w", privPath, err)
	}
	return &DevKeys{private: k, JWKSPath: pubPath}, nil
}

func createDevKeys(dir, privPath, pubPath string) (*DevKeys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	k, err := jwk.Import(priv)
	if err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	kid := fmt.Sprintf("dev-%d", time.Now().Unix())
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		return nil, err
	}
	if err := k.Set(jwk.AlgorithmKey, jwa.EdDSA()); err != nil {
		return nil, err
	}
	pub, err := jwk.PublicKeyOf(k)
	if err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return nil, err
	}
	privJSON, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return nil, err
	}
	pubJSON, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(privPath, privJSON, 0o600); err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	if err := os.WriteFile(pubPath, pubJSON, 0o644); err != nil {
		return nil, fmt.Errorf("dev keys: %w", err)
	}
	return &DevKeys{private: k, JWKSPath: pubPath}, nil
}

// Mint signs a token for c, valid for ttl, issued by DevIssuer.
func (d *DevKeys) Mint(c Claims, ttl time.Duration) (string, error) {
	now := time.Now()
	tok, err := jwt.NewBuilder().Issuer(DevIssuer).Audience([]string{audience}).Subject(c.Subject).
		IssuedAt(now).NotBefore(now.Add(-time.Second)).Expiration(now.Add(ttl)).
		Claim("tenant_id", c.TenantID).Claim("roles", c.Roles).Build()
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA(), d.private))
	if err != nil {
		return "", fmt.Errorf("mint: %w", err)
	}
	return string(signed), nil
}
