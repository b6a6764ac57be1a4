package devcert_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/agora-platform/agora/deploy/devcert"
	"github.com/agora-platform/agora/pkg/fabric/broker"
)

// The local broker's TLS listener, as configured by deploy/local/tls.sh
// (run by `make infra`).
func tlsURL() string {
	if u := os.Getenv("AMQPS_URL"); u != "" {
		return u
	}
	return "amqps://guest:guest@127.0.0.1:5671/"
}

func certDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGORA_CERT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".data", "certs")
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatalf("development CA missing (%v): run `make infra` (deploy/local/tls.sh) or `make certs`", err)
	}
	return dir
}

func dial(cfg *tls.Config) (*amqp.Connection, error) {
	return amqp.DialConfig(tlsURL(), amqp.Config{TLSClientConfig: cfg, Dial: amqp.DefaultDial(5 * time.Second)})
}

// writePair writes leaf's certificate and key into dir.
func writePair(t *testing.T, dir, name string, leaf *devcert.Leaf) (certFile, keyFile string) {
	t.Helper()
	key, err := devcert.KeyPEM(leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, devcert.CertPEM(leaf.Cert), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestBrokerTLS(t *testing.T) {
	dir := certDir(t)
	ca := filepath.Join(dir, "ca.pem")

	rogue, err := devcert.NewAuthority("rogue CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rogueClient, err := rogue.Issue(devcert.Request{CommonName: "agora-dev-client", Usage: devcert.ClientAuth, NotBefore: time.Now(), ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	rogueCert, rogueKey := writePair(t, tmp, "rogue-client", rogueClient)
	rogueCA := filepath.Join(tmp, "rogue-ca.pem")
	if err := os.WriteFile(rogueCA, devcert.CertPEM(rogue.Cert), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name              string
		caFile, cert, key string
		wantOK            bool
		wantErrContains   []string // any of these
		// force makes the client present its certificate even when the
		// server's CertificateRequest names other CAs: Go's default
		// selection would silently send none (and, with
		// fail_if_no_peer_cert = false, connect without it), while other
		// TLS stacks send what they are given.
		force bool
		// maxVersion pins the TLS version: under TLS 1.2 the broker rejects a
		// client certificate inside the handshake (a deterministic alert);
		// under TLS 1.3 the client's handshake completes first and the
		// rejection arrives as an alert or a reset on the next write.
		maxVersion uint16
	}{
		{name: "dev CA, no client certificate", caFile: ca, wantOK: true},
		{name: "dev CA, dev client certificate", caFile: ca, cert: filepath.Join(dir, "client.pem"), key: filepath.Join(dir, "client-key.pem"), wantOK: true},
		{name: "client certificate from another CA is refused by the broker (TLS 1.2)", caFile: ca, cert: rogueCert, key: rogueKey, force: true,
			maxVersion: tls.VersionTLS12, wantErrContains: []string{"unknown certificate authority", "bad certificate", "unknown ca"}},
		// In TLS 1.3 the client finishes its handshake before the broker
		// checks the certificate, so the refusal reaches it as whatever its
		// next read or write meets: the alert, a reset, EOF, or amqp091's
		// "channel/connection is not open" (504) or "use of closed network
		// connection" when the close wins the race with the AMQP handshake
		// (each seen once in a CI rehearsal).
		{name: "client certificate from another CA is refused by the broker (TLS 1.3)", caFile: ca, cert: rogueCert, key: rogueKey, force: true,
			wantErrContains: []string{"unknown certificate authority", "bad certificate", "unknown ca", "connection reset by peer", "broken pipe", "EOF",
				"channel/connection is not open", "use of closed network connection"}},
		{name: "broker certificate not trusted without the dev CA", caFile: rogueCA,
			wantErrContains: []string{"certificate signed by unknown authority"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := broker.TLSConfig(tt.caFile, tt.cert, tt.key)
			if err != nil {
				t.Fatalf("broker.TLSConfig: %v", err)
			}
			cfg.MaxVersion = tt.maxVersion
			if tt.force {
				own := cfg.Certificates[0]
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &own, nil }
			}
			conn, err := dial(cfg)
			if tt.wantOK {
				if err != nil {
					t.Fatalf("dial %s: %v (is the TLS listener up? run `make infra`)", tlsURL(), err)
				}
				defer conn.Close()
				st := conn.ConnectionState()
				if !st.HandshakeComplete || st.Version < tls.VersionTLS12 {
					t.Errorf("TLS state: handshake %v version %x", st.HandshakeComplete, st.Version)
				}
				ch, err := conn.Channel()
				if err != nil {
					t.Fatalf("channel over TLS: %v", err)
				}
				ch.Close()
				t.Logf("connected over %s", tls.VersionName(st.Version))
				return
			}
			if err == nil {
				conn.Close()
				t.Fatalf("dial %s succeeded, want a TLS refusal", tlsURL())
			}
			matched := false
			for _, s := range tt.wantErrContains {
				matched = matched || strings.Contains(err.Error(), s)
			}
			if !matched {
				t.Errorf("dial error = %v, want one mentioning %q", err, tt.wantErrContains)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name              string
		caFile, cert, key string
	}{
		{"missing CA file", filepath.Join(dir, "absent.pem"), "", ""},
		{"CA file without PEM", notPEM, "", ""},
		{"cert without key", "", notPEM, ""},
		{"unreadable pair", "", notPEM, notPEM},
	}
	for _, tt := range tests {
		if _, err := broker.TLSConfig(tt.caFile, tt.cert, tt.key); err == nil {
			t.Errorf("%s: TLSConfig succeeded, want an error", tt.name)
		}
	}
}
