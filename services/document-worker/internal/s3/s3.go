// Package s3 keeps documents and their text in MinIO (or any S3).
package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agora-platform/agora/services/document-worker/internal/document"
)

// Store is an S3 client for the worker's bucket.
type Store struct {
	client *minio.Client
}

var _ document.ObjectStore = (*Store)(nil)

// New returns a Store for endpoint (host:port) without TLS when secure is false.
func New(endpoint, accessKey, secretKey string, secure bool) (*Store, error) {
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), Secure: secure})
	if err != nil {
		return nil, fmt.Errorf("s3 client %s: %w", endpoint, err)
	}
	return &Store{client: c}, nil
}

// EnsureBucket creates bucket when missing. It returns document.ErrUnavailable
// when storage cannot be reached.
func (s *Store) EnsureBucket(ctx context.Context, bucket string) error {
	ok, err := s.client.BucketExists(ctx, bucket)
	if err != nil {
		return fmt.Errorf("bucket %s: %v: %w", bucket, err, document.ErrUnavailable)
	}
	if ok {
		return nil
	}
	if err := s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		if ok, err2 := s.client.BucketExists(ctx, bucket); err2 == nil && ok {
			return nil // created concurrently by another instance
		}
		return fmt.Errorf("make bucket %s: %w", bucket, err)
	}
	return nil
}

// Get returns the bytes of bucket/key: document.ErrNotFound when it does
// not exist, document.ErrUnavailable when storage cannot be reached.
func (s *Store) Get(ctx context.Context, bucket, key string) ([]byte, error) {
	obj, err := s.client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, classify("get", bucket, key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, classify("get", bucket, key, err)
	}
	return data, nil
}

// Put stores data at bucket/key; document.ErrUnavailable when storage
// cannot be reached.
func (s *Store) Put(ctx context.Context, bucket, key, contentType string, data []byte) error {
	if _, err := s.client.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return classify("put", bucket, key, err)
	}
	return nil
}

func classify(op, bucket, key string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, minio.NoSuchBucket:
		return fmt.Errorf("%s %s/%s: %w", op, bucket, key, document.ErrNotFound)
	case minio.AccessDenied:
		return fmt.Errorf("%s %s/%s: %v", op, bucket, key, err)
	}
	// Anything else (refused connection, 5xx, timeouts) may heal.
	return fmt.Errorf("%s %s/%s: %v: %w", op, bucket, key, err, document.ErrUnavailable)
}
