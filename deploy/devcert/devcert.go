// Package devcert makes a local development certificate authority and the
// server and client certificates it signs, with Go's crypto only (no openssl).
// The certificates are for development machines and docker compose; a real
// deployment brings its own (cert-manager, a corporate CA).
package devcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Authority is a CA that can issue certificates.
type Authority struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewAuthority creates a self-signed CA named commonName, valid from now for
// validFor.
func NewAuthority(commonName string, now time.Time, validFor time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devcert: CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Agora local development"}},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between host and containers
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("devcert: self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devcert: parse CA: %w", err)
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// Usage says what a leaf certificate is for.
type Usage int

// Usages.
const (
	ServerAuth Usage = iota + 1
	ClientAuth
)

// Request describes a leaf certificate.
type Request struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	Usage      Usage
	NotBefore  time.Time
	ValidFor   time.Duration
}

// Leaf is an issued certificate with its private key.
type Leaf struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Issue signs a new leaf certificate for req.
func (a *Authority) Issue(req Request) (*Leaf, error) {
	if req.Usage != ServerAuth && req.Usage != ClientAuth {
		return nil, errors.New("devcert: request needs a usage (ServerAuth or ClientAuth)")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devcert: key for %s: %w", req.CommonName, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	ext := x509.ExtKeyUsageServerAuth
	if req.Usage == ClientAuth {
		ext = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: []string{"Agora local development"}},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
		NotBefore:    req.NotBefore.Add(-time.Hour),
		NotAfter:     req.NotBefore.Add(req.ValidFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{ext},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, key.Public(), a.Key)
	if err != nil {
		return nil, fmt.Errorf("devcert: sign %s: %w", req.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devcert: parse %s: %w", req.CommonName, err)
	}
	return &Leaf{Cert: cert, Key: key}, nil
}

// CertPEM encodes a certificate.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// KeyPEM encodes a private key as PKCS#8, which Erlang/OTP (RabbitMQ) and Go read.
func KeyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("devcert: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCertPEM decodes the first certificate in data.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("devcert: no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("devcert: parse certificate: %w", err)
			}
			return c, nil
		}
	}
}

// LoadAuthority reads a CA certificate and its PKCS#8 key.
func LoadAuthority(certPEM, keyPEM []byte) (*Authority, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("devcert: no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("devcert: parse CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("devcert: CA key cannot sign")
	}
	return &Authority{Cert: cert, Key: signer}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("devcert: serial number: %w", err)
	}
	return n, nil
}
