package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/auth"
)

// runToken mints a LOCAL-DEVELOPMENT token signed by the dev key in
// --keys-dir (created on first use, with the JWKS services read through
// JWT_KEYS).
func runToken(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	tenant := fs.String("tenant", "org-demo", "tenant_id claim")
	sub := fs.String("sub", "citizen-demo", "sub claim (the user)")
	roles := fs.String("roles", auth.RoleCitizen, "comma-separated roles: citizen, attendant, operator, replay-admin")
	ttl := fs.Duration("ttl", 12*time.Hour, "lifetime")
	dir := fs.String("keys-dir", ".data/jwt", "where the dev signing key and jwks.json live")
	if err := fs.Parse(args); err != nil {
		return err
	}
	keys, err := auth.LoadOrCreateDevKeys(*dir)
	if err != nil {
		return err
	}
	tok, err := keys.Mint(auth.Claims{Subject: *sub, TenantID: *tenant, Roles: strings.Split(*roles, ",")}, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
