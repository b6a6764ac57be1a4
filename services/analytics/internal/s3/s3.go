// Package s3 keeps export files in an S3-compatible store (MinIO) with
// minio-go: streamed uploads into one bucket, created when missing, and
// presigned download links.
package s3

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// partSize bounds the memory a streamed upload of unknown length buffers
// (minio-go otherwise sizes parts for 5 TiB objects); 5 MiB is S3's least.
const partSize = 5 << 20

// Config locates the store.
type Config struct {
	Endpoint  string // host:port, or a URL (https:// turns TLS on)
	AccessKey string
	SecretKey string
	Bucket    string
	// PublicEndpoint is the store as the clients who download see it, when
	// that differs from Endpoint (a container network name, a cluster
	// address): presigned links name it, since the signature covers the
	// host. Empty: Endpoint.
	PublicEndpoint string
}

// Store is one bucket.
type Store struct {
	client *minio.Client
	bucket string
	cfg    Config
	ready  atomic.Bool

	mu     sync.Mutex
	public *minio.Client // signs links; made once the bucket's region is known
}

// New returns a Store; it does not contact the server.
func New(cfg Config) (*Store, error) {
	c, err := client(cfg.Endpoint, cfg, "")
	if err != nil {
		return nil, err
	}
	s := &Store{client: c, bucket: cfg.Bucket, cfg: cfg}
	if cfg.PublicEndpoint == "" {
		s.public = c
	}
	return s, nil
}

func client(endpoint string, cfg Config, region string) (*minio.Client, error) {
	host, secure := endpoint, false
	switch {
	case strings.HasPrefix(host, "https://"):
		host, secure = strings.TrimPrefix(host, "https://"), true
	case strings.HasPrefix(host, "http://"):
		host = strings.TrimPrefix(host, "http://")
	}
	c, err := minio.New(strings.TrimSuffix(host, "/"), &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: secure,
		Region: region,
		// A failed export waits in a retry tier; retrying here too only
		// holds its worker longer.
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client %s: %w", endpoint, err)
	}
	return c, nil
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// EnsureBucket creates the bucket if it is missing. The service calls it
// at start; Put calls it again until it has succeeded once, so exports
// work once the store is back even if it was down at start.
func (s *Store) EnsureBucket(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", s.bucket, err)
	}
	if !ok {
		if err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{}); err != nil {
			// Another instance may have won the race.
			if exists, err2 := s.client.BucketExists(ctx, s.bucket); err2 != nil || !exists {
				return fmt.Errorf("create bucket %s: %w", s.bucket, err)
			}
		}
	}
	s.ready.Store(true)
	return nil
}

// Put streams body to key, replacing what is there. It returns once the
// server has the whole object.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, contentType string) error {
	if err := s.EnsureBucket(ctx); err != nil {
		return err
	}
	if _, err := s.client.PutObject(ctx, s.bucket, key, body, -1,
		minio.PutObjectOptions{ContentType: contentType, PartSize: partSize}); err != nil {
		return fmt.Errorf("put %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// URL returns a link that downloads key, as filename, without credentials
// until ttl has passed.
func (s *Store) URL(ctx context.Context, key, filename string, ttl time.Duration) (*url.URL, error) {
	signer, err := s.signer(ctx)
	if err != nil {
		return nil, err
	}
	params := url.Values{}
	if filename != "" {
		params.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	}
	u, err := signer.PresignedGetObject(ctx, s.bucket, key, ttl, params)
	if err != nil {
		return nil, fmt.Errorf("presign %s/%s: %w", s.bucket, key, err)
	}
	return u, nil
}

// signer is the client that signs links. For a public endpoint it is a
// client of its own, told the bucket's region (asked of the internal
// endpoint, which the service can reach): without a region, minio-go would
// ask the public endpoint, which the service may not reach.
func (s *Store) signer(ctx context.Context) (*minio.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.public != nil {
		return s.public, nil
	}
	region, err := s.client.GetBucketLocation(ctx, s.bucket)
	if err != nil {
		return nil, fmt.Errorf("region of bucket %s: %w", s.bucket, err)
	}
	c, err := client(s.cfg.PublicEndpoint, s.cfg, region)
	if err != nil {
		return nil, err
	}
	s.public = c
	return c, nil
}
