package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-platform/agora/pkg/fabric"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
)

// Every spelling of an endpoint the services are given reaches the same
// host, and https:// turns TLS on: the first byte the store sends is a TLS
// handshake record (0x16) for https:// and plain HTTP otherwise.
func TestEndpoints(t *testing.T) {
	for _, tt := range []struct {
		form string
		tls  bool
	}{{"%s", false}, {"http://%s", false}, {"https://%s", true}, {"https://%s/", true}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		endpoint := fmt.Sprintf(tt.form, ln.Addr())
		s, err := objstore.New(objstore.Config{Endpoint: endpoint, AccessKey: "a", SecretKey: "b"})
		if err != nil {
			t.Fatalf("New(%q): %v", endpoint, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		go func() { _, _ = s.Get(ctx, "bucket", "key") }()
		conn, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, 1)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(conn, first); err != nil {
			t.Fatalf("%s: read: %v", endpoint, err)
		}
		if got := first[0] == 0x16; got != tt.tls {
			t.Errorf("%s: TLS = %v (first byte %q), want %v", endpoint, got, first, tt.tls)
		}
		conn.Close()
		ln.Close()
		cancel()
	}
	if _, err := objstore.New(objstore.Config{Endpoint: "https://"}); err == nil {
		t.Error("New with no host: no error")
	}
}

// Against the machine's MinIO (make infra): a round trip, and each failure
// in its class.
func TestRoundTripAndFailureClasses(t *testing.T) {
	cfg := objstore.Config{Endpoint: env("S3_ENDPOINT", "127.0.0.1:9000"), AccessKey: env("S3_ACCESS_KEY", "agora-dev"), SecretKey: env("S3_SECRET_KEY", "agora-dev-secret")}
	s, err := objstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bucket := "objstore-test"
	if err := s.EnsureBucket(ctx, bucket); err != nil {
		t.Fatalf("EnsureBucket (is MinIO up? make infra): %v", err)
	}
	key := "k-" + time.Now().Format("150405.000000000")
	if err := s.Put(ctx, bucket, key, strings.NewReader("hello"), -1, "text/plain"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, bucket, key); err != nil || string(got) != "hello" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	small := cfg
	small.MaxGet = 4
	if _, err := must(objstore.New(small)).Get(ctx, bucket, key); fabric.ClassOf(err) != fabric.ClassPermanent || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("Get of 5 bytes with MaxGet 4 = %v, want a permanent error", err)
	}
	var seen bool
	if err := s.Walk(ctx, bucket, time.Now().Add(time.Minute), func(k string) error {
		seen = seen || k == key
		return nil
	}); err != nil || !seen {
		t.Fatalf("Walk saw %s = %v, err %v", key, seen, err)
	}
	if err := s.Remove(ctx, bucket, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, bucket, key); !errors.Is(err, fabric.ErrNotFound) {
		t.Errorf("Get of a removed key = %v, want fabric.ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "objstore-no-such-bucket", key); !errors.Is(err, fabric.ErrNotFound) {
		t.Errorf("Get in a missing bucket = %v, want fabric.ErrNotFound", err)
	}
	wrong := cfg
	wrong.SecretKey = "not-the-secret"
	bad, _ := objstore.New(wrong)
	if _, err := bad.Get(ctx, bucket, key); fabric.ClassOf(err) != fabric.ClassPermanent {
		t.Errorf("Get with a wrong secret = %v (class %s), want permanent", err, fabric.ClassOf(err))
	}
	down, _ := objstore.New(objstore.Config{Endpoint: "127.0.0.1:1", AccessKey: "a", SecretKey: "b"})
	if err := down.Put(ctx, bucket, key, strings.NewReader("x"), 1, "text/plain"); fabric.ClassOf(err) != fabric.ClassTransient {
		t.Errorf("Put to a store that is down = %v (class %s), want transient", err, fabric.ClassOf(err))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// PrepareBucket does not hold a start-up on a store that is down: it
// returns and says so on the log, and the service goes on.
func TestPrepareBucketOnlyWarnsWhenTheStoreIsDown(t *testing.T) {
	down, _ := objstore.New(objstore.Config{Endpoint: "127.0.0.1:1", AccessKey: "a", SecretKey: "b"})
	var log bytes.Buffer
	down.PrepareBucket(context.Background(), "documents", slog.New(slog.NewTextHandler(&log, nil)))
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "bucket=documents") {
		t.Errorf("log = %q, want a warning naming the bucket", log.String())
	}
}
