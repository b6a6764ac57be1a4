// Package s3 stores document bytes in an S3-compatible object store
// (MinIO locally).
package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// partSize bounds the memory a streamed upload of unknown length buffers
// (minio-go otherwise sizes parts for 5 TiB objects).
const partSize = 5 << 20

// Store is one bucket.
type Store struct {
	client *minio.Client
	bucket string
}

// Config locates the object store.
type Config struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string
	Secure    bool
	Bucket    string
}

// Open connects to the object store and creates the bucket if missing. It
// returns an error naming the endpoint when the store is unreachable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: cfg.Secure,
	})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", cfg.Endpoint, err)
	}
	exists, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("object store %s: bucket %s: %w", cfg.Endpoint, cfg.Bucket, err)
	}
	if !exists {
		if err := c.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{}); err != nil {
			// Another instance may have created it meanwhile.
			if ok, err2 := c.BucketExists(ctx, cfg.Bucket); err2 != nil || !ok {
				return nil, fmt.Errorf("object store %s: create bucket %s: %w", cfg.Endpoint, cfg.Bucket, err)
			}
		}
	}
	return &Store{client: c, bucket: cfg.Bucket}, nil
}

// Put streams body to key. A read error of body is returned wrapped.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, contentType string) error {
	if _, err := s.client.PutObject(ctx, s.bucket, key, body, -1,
		minio.PutObjectOptions{ContentType: contentType, PartSize: partSize}); err != nil {
		return fmt.Errorf("put %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// Remove deletes key.
func (s *Store) Remove(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("remove %s/%s: %w", s.bucket, key, err)
	}
	return nil
}
