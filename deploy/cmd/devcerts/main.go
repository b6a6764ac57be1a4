// Command devcerts creates the local development CA and the broker's server
// certificate and a client certificate, signed by it, into one directory
// (default .data/certs, gitignored):
//
//	ca.pem ca-key.pem            the development CA (trust ca.pem in clients)
//	server.pem server-key.pem    RabbitMQ's certificate: localhost, 127.0.0.1, ::1, rabbitmq (+ -hosts)
//	client.pem client-key.pem    a client certificate (CN agora-dev-client)
//
// It is idempotent: files that are present, signed by the CA, cover the
// requested names and stay valid for 30 more days are kept (-force renews).
// An existing CA is reused, so clients that trust it keep working.
package main

import (
	"crypto"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agora-platform/agora/deploy/devcert"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "devcerts:", err)
		os.Exit(1)
	}
}

const (
	caValidity   = 5 * 365 * 24 * time.Hour
	leafValidity = 397 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

func run(args []string, stdout io.Writer, now time.Time) error {
	fs := flag.NewFlagSet("devcerts", flag.ContinueOnError)
	dir := fs.String("out", ".data/certs", "output directory")
	hosts := fs.String("hosts", "", "extra server names or IPs, comma separated")
	force := fs.Bool("force", false, "renew the server and client certificates even when valid")
	keyMode := fs.String("key-mode", "0600", "file mode of private keys (0644 only for a docker volume shared with a non-root broker)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := strconv.ParseUint(*keyMode, 8, 32)
	if err != nil {
		return fmt.Errorf("-key-mode %q: %w", *keyMode, err)
	}
	names := []string{"localhost", "127.0.0.1", "::1", "rabbitmq"}
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" && !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *dir, err)
	}
	path := func(name string) string { return filepath.Join(*dir, name) }
	w := writer{mode: os.FileMode(mode)}

	ca, created, err := loadOrCreateCA(path("ca.pem"), path("ca-key.pem"), now, w)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stdout, "created CA %s\n", path("ca.pem"))
	}
	var dns []string
	var ips []net.IP
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, n)
		}
	}
	leaves := []struct {
		file string
		req  devcert.Request
	}{
		{"server", devcert.Request{CommonName: "rabbitmq", DNSNames: dns, IPs: ips, Usage: devcert.ServerAuth}},
		{"client", devcert.Request{CommonName: "agora-dev-client", Usage: devcert.ClientAuth}},
	}
	for _, l := range leaves {
		certFile, keyFile := path(l.file+".pem"), path(l.file+"-key.pem")
		if !*force && !created && leafValid(ca, certFile, keyFile, l.req, now) {
			fmt.Fprintf(stdout, "kept %s (valid, signed by the CA)\n", certFile)
			continue
		}
		l.req.NotBefore, l.req.ValidFor = now, leafValidity
		leaf, err := ca.Issue(l.req)
		if err != nil {
			return err
		}
		if err := w.pair(certFile, keyFile, leaf.Cert, leaf.Key); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "issued %s\n", certFile)
	}
	return nil
}

func loadOrCreateCA(certFile, keyFile string, now time.Time, w writer) (*devcert.Authority, bool, error) {
	certPEM, cerr := os.ReadFile(certFile)
	keyPEM, kerr := os.ReadFile(keyFile)
	if cerr == nil && kerr == nil {
		ca, err := devcert.LoadAuthority(certPEM, keyPEM)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w (delete the directory to start over)", certFile, err)
		}
		if now.Add(renewBefore).Before(ca.Cert.NotAfter) {
			return ca, false, nil
		}
	} else if !errors.Is(cerr, os.ErrNotExist) && cerr != nil {
		return nil, false, fmt.Errorf("read CA: %w", cerr)
	}
	ca, err := devcert.NewAuthority("Agora local development CA", now, caValidity)
	if err != nil {
		return nil, false, err
	}
	if err := w.pair(certFile, keyFile, ca.Cert, ca.Key); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}

// leafValid reports whether the files hold a certificate signed by ca,
// matching its key, covering req's names and valid past the renewal window.
func leafValid(ca *devcert.Authority, certFile, keyFile string, req devcert.Request, now time.Time) bool {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return false
	}
	if _, err := os.Stat(keyFile); err != nil {
		return false
	}
	cert, err := devcert.ParseCertPEM(certPEM)
	if err != nil || cert.CheckSignatureFrom(ca.Cert) != nil || !now.Add(renewBefore).Before(cert.NotAfter) {
		return false
	}
	for _, n := range req.DNSNames {
		if cert.VerifyHostname(n) != nil {
			return false
		}
	}
	for _, ip := range req.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

type writer struct{ mode os.FileMode }

// pair writes the key (with w.mode) and the certificate (0644), each through
// a temporary file and a rename so a reader never sees half a file.
func (w writer) pair(certFile, keyFile string, cert *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := devcert.KeyPEM(key)
	if err != nil {
		return err
	}
	if err := writeAtomic(keyFile, keyPEM, w.mode); err != nil {
		return err
	}
	return writeAtomic(certFile, devcert.CertPEM(cert), 0o644)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".devcerts-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
