package main

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/deploy/devcert"
)

func TestRunIsIdempotentAndChainsVerify(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	var out bytes.Buffer
	if err := run([]string{"-out", dir, "-hosts", "broker.example,10.0.0.7"}, &out, now); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(dir, "server.pem"))
	out.Reset()
	if err := run([]string{"-out", dir, "-hosts", "broker.example,10.0.0.7"}, &out, now); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "issued") || strings.Contains(got, "created") {
		t.Errorf("second run = %q, want everything kept", got)
	}
	second, _ := os.ReadFile(filepath.Join(dir, "server.pem"))
	if !bytes.Equal(first, second) {
		t.Error("second run rewrote server.pem")
	}
	// A new name renews the server certificate under the same CA.
	if err := run([]string{"-out", dir, "-hosts", "other.example"}, &out, now); err != nil {
		t.Fatal(err)
	}

	read := func(name string) *x509.Certificate {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		c, err := devcert.ParseCertPEM(data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	roots := x509.NewCertPool()
	roots.AddCert(read("ca.pem"))
	server, client := read("server.pem"), read("client.pem")
	for _, name := range []string{"localhost", "127.0.0.1", "rabbitmq", "other.example"} {
		if _, err := server.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "server-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("server key mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
}
