package servicetoken

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agora-platform/agora/pkg/fabric/auth"
)

// TestTokensVerify: a token minted with the development key passes the
// platform's verifier (issuer, audience, tenant, role), as the AI
// builder checks it.
func TestTokensVerify(t *testing.T) {
	dir := t.TempDir()
	keys, err := auth.LoadOrCreateDevKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(filepath.Join(dir, "dev-signing-key.json"), auth.DevIssuer, auth.RoleAttendant)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := m.Mint("org-a")
	if err != nil {
		t.Fatal(err)
	}
	set, err := auth.LoadKeys(context.Background(), keys.JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := auth.NewVerifier(set, auth.DevIssuer).Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.TenantID != "org-a" || c.Subject != Subject || len(c.Roles) != 1 || c.Roles[0] != auth.RoleAttendant {
		t.Errorf("claims %+v", c)
	}
	if _, err := auth.NewVerifier(set, "another-issuer").Verify(tok); err == nil {
		t.Error("a verifier of another issuer accepted the token")
	}
	if _, err := Load(keys.JWKSPath, auth.DevIssuer); err == nil {
		t.Error("a public key set was accepted as a signing key")
	}
}
