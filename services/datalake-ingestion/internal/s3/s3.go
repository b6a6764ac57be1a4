// Package s3 writes lake files to an S3-compatible store (MinIO) with
// minio-go, and reads them back for the history API.
package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config locates the store.
type Config struct {
	Endpoint  string // host:port, or a URL (https:// turns TLS on)
	AccessKey string
	SecretKey string
	Bucket    string
}

// Store puts and removes objects in one bucket, creating it on first use
// so the service starts (and waits for the store) even while S3 is down.
type Store struct {
	client *minio.Client
	bucket string
	ready  atomic.Bool
}

// New returns a Store; it does not contact the server.
func New(cfg Config) (*Store, error) {
	endpoint, secure := cfg.Endpoint, false
	switch {
	case strings.HasPrefix(endpoint, "https://"):
		endpoint, secure = strings.TrimPrefix(endpoint, "https://"), true
	case strings.HasPrefix(endpoint, "http://"):
		endpoint = strings.TrimPrefix(endpoint, "http://")
	}
	c, err := minio.New(endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: secure,
		// The message waits in a retry tier when S3 is down; retrying
		// here too only holds the whole batch longer.
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client %s: %w", cfg.Endpoint, err)
	}
	return &Store{client: c, bucket: cfg.Bucket}, nil
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

func (s *Store) ensureBucket(ctx context.Context) error {
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

// Put writes data at key. It returns once the server has acknowledged the
// whole object.
func (s *Store) Put(ctx context.Context, key string, data []byte, contentType string) error {
	if err := s.ensureBucket(ctx); err != nil {
		return err
	}
	if _, err := s.client.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("put %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// Get returns the whole object at key in bucket: a lineage row names the
// bucket its event was written to, which need not be the one this
// instance writes now (DATALAKE_BUCKET may have changed since).
func (s *Store) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	return data, nil
}

// Remove deletes key (used to take back the files of a failed batch).
func (s *Store) Remove(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("remove %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// Walk calls fn with the key of every object last modified before before,
// in key order, listing page by page (the bucket may hold millions). It
// stops at the first error, fn's included.
func (s *Store) Walk(ctx context.Context, before time.Time, fn func(key string) error) error {
	if err := s.ensureBucket(ctx); err != nil {
		return err
	}
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("list %s: %w", s.bucket, o.Err)
		}
		if o.LastModified.Before(before) {
			if err := fn(o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}
