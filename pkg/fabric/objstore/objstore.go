// Package objstore is the chassis' one S3 adapter: the services' documents,
// texts, data-lake files and report exports all go through it, so an
// endpoint is read the same way everywhere (host:port, or a URL whose
// https:// turns TLS on) and its failures are classified once: a missing
// object or bucket is fabric.ErrNotFound (permanent: a retry cannot make it
// appear), a refused access is permanent too, and anything else (a refused
// connection, a 5xx, a timeout) is transient, so the message waits in a
// retry tier while the store is down.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agora-platform/agora/pkg/fabric"
)

// partSize bounds the memory a streamed upload of unknown length buffers
// (minio-go otherwise sizes parts for 5 TiB objects); 5 MiB is S3's least.
const partSize = 5 << 20

// Config locates the store.
type Config struct {
	// Endpoint is host:port, or a URL: https:// turns TLS on.
	Endpoint  string
	AccessKey string
	SecretKey string
	// PublicEndpoint is the store as the clients who download see it, when
	// that differs from Endpoint (a container network name, a cluster
	// address): presigned links name it, since the signature covers the
	// host. Empty: Endpoint.
	PublicEndpoint string
	// MaxGet bounds what Get brings into memory (default 64 MiB): a larger
	// object is a permanent error, never a truncated read.
	MaxGet int64
}

const defaultMaxGet = 64 << 20

// store reads and writes objects. It contacts the server only when used,
// so a service starts (and its messages wait) while the store is down.
// Services reach it through interfaces of their own (the methods they
// use), so the type itself is not part of the API.
type store struct {
	cfg    Config
	client *minio.Client
	ready  sync.Map // bucket → struct{}: known to exist

	mu      sync.Mutex
	signers map[string]*minio.Client // bucket → the client that signs its links
}

// New returns a store for cfg.
func New(cfg Config) (*store, error) {
	c, err := client(cfg.Endpoint, cfg, "")
	if err != nil {
		return nil, err
	}
	if cfg.MaxGet <= 0 {
		cfg.MaxGet = defaultMaxGet
	}
	return &store{cfg: cfg, client: c, signers: map[string]*minio.Client{}}, nil
}

func client(endpoint string, cfg Config, region string) (*minio.Client, error) {
	host, secure := endpoint, false
	switch {
	case strings.HasPrefix(host, "https://"):
		host, secure = strings.TrimPrefix(host, "https://"), true
	case strings.HasPrefix(host, "http://"):
		host = strings.TrimPrefix(host, "http://")
	}
	if host == "" {
		return nil, errors.New("objstore: no endpoint (S3_ENDPOINT): want host:port or a URL")
	}
	c, err := minio.New(strings.TrimSuffix(host, "/"), &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: secure,
		Region: region,
		// A failed message waits in a retry tier; retrying here too only
		// holds its handler longer.
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("objstore %s: %w", endpoint, err)
	}
	return c, nil
}

// EnsureBucket creates bucket if it is missing (another instance creating
// it at the same moment is fine). Put calls it until it has succeeded once.
func (s *store) EnsureBucket(ctx context.Context, bucket string) error {
	if _, ok := s.ready.Load(bucket); ok {
		return nil
	}
	ok, err := s.client.BucketExists(ctx, bucket)
	if err != nil {
		return classify("bucket", bucket, "", err)
	}
	if !ok {
		if err := s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
			if exists, err2 := s.client.BucketExists(ctx, bucket); err2 != nil || !exists {
				return classify("create bucket", bucket, "", err)
			}
		}
	}
	s.ready.Store(bucket, struct{}{})
	return nil
}

// startTimeout bounds how long PrepareBucket holds a service's start-up.
const startTimeout = 10 * time.Second

// PrepareBucket creates bucket at start-up when the store answers within
// 10 s, and otherwise only warns on log: a store that is down must not
// keep the service from starting, since its messages wait in the retry
// tiers meanwhile and Put creates the bucket once the store is back. A
// service that cannot run without the bucket calls EnsureBucket instead.
func (s *store) PrepareBucket(ctx context.Context, bucket string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.EnsureBucket(ctx, bucket); err != nil {
		log.WarnContext(ctx, "bucket not ready at start; it is created when first written", "bucket", bucket, "err", err)
	}
}

// Put stores body at bucket/key, replacing what is there, and returns once
// the server has the whole object. size -1 streams a body of unknown
// length.
func (s *store) Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) error {
	if err := s.EnsureBucket(ctx, bucket); err != nil {
		return err
	}
	if _, err := s.client.PutObject(ctx, bucket, key, body, size,
		minio.PutObjectOptions{ContentType: contentType, PartSize: partSize}); err != nil {
		return classify("put", bucket, key, err)
	}
	return nil
}

// Get returns the bytes of bucket/key, at most Config.MaxGet of them.
func (s *store) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, classify("get", bucket, key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, s.cfg.MaxGet+1))
	if err != nil {
		return nil, classify("get", bucket, key, err)
	}
	if int64(len(data)) > s.cfg.MaxGet {
		return nil, fabric.Permanent(fmt.Errorf("objstore: get %s/%s: larger than %d bytes", bucket, key, s.cfg.MaxGet))
	}
	return data, nil
}

// Remove deletes bucket/key; a key already gone is not an error.
func (s *store) Remove(ctx context.Context, bucket, key string) error {
	if err := s.client.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return classify("remove", bucket, key, err)
	}
	return nil
}

// Walk calls fn with the key of every object of bucket last modified
// before before, in key order, listing page by page (a bucket may hold
// millions). It stops at the first error, fn's included.
func (s *store) Walk(ctx context.Context, bucket string, before time.Time, fn func(key string) error) error {
	if err := s.EnsureBucket(ctx, bucket); err != nil {
		return err
	}
	for o := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return classify("list", bucket, "", o.Err)
		}
		if o.LastModified.Before(before) {
			if err := fn(o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// URL returns a link that downloads bucket/key, as filename, without
// credentials until ttl has passed; it names PublicEndpoint when set.
func (s *store) URL(ctx context.Context, bucket, key, filename string, ttl time.Duration) (*url.URL, error) {
	signer, err := s.signer(ctx, bucket)
	if err != nil {
		return nil, err
	}
	params := url.Values{}
	if filename != "" {
		params.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	}
	u, err := signer.PresignedGetObject(ctx, bucket, key, ttl, params)
	if err != nil {
		return nil, classify("presign", bucket, key, err)
	}
	return u, nil
}

// signer is the client that signs bucket's links. For a public endpoint it
// is a client of its own, told the bucket's region (asked of the internal
// endpoint, which the service can reach): without a region, minio-go would
// ask the public endpoint, which the service may not reach.
func (s *store) signer(ctx context.Context, bucket string) (*minio.Client, error) {
	if s.cfg.PublicEndpoint == "" {
		return s.client, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.signers[bucket]; ok {
		return c, nil
	}
	region, err := s.client.GetBucketLocation(ctx, bucket)
	if err != nil {
		return nil, classify("region of bucket", bucket, "", err)
	}
	c, err := client(s.cfg.PublicEndpoint, s.cfg, region)
	if err != nil {
		return nil, err
	}
	s.signers[bucket] = c
	return c, nil
}

// classify wraps err with what failed and its class (package comment).
func classify(op, bucket, key string, err error) error {
	what := bucket
	if key != "" {
		what += "/" + key
	}
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, minio.NoSuchBucket:
		return fmt.Errorf("objstore: %s %s: %v: %w", op, what, err, fabric.ErrNotFound)
	case minio.AccessDenied, "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fabric.Permanent(fmt.Errorf("objstore: %s %s: %w", op, what, err))
	}
	return fabric.Transient(fmt.Errorf("objstore: %s %s: %w", op, what, err))
}
