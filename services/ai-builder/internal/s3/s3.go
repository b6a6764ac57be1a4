// Package s3 reads extracted document text from MinIO (or any S3).
package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
)

// maxText bounds what one document may bring into memory.
const maxText = 32 << 20

// Source reads text objects of one bucket.
type Source struct {
	client *minio.Client
	bucket string
}

var _ knowledge.TextSource = (*Source)(nil)

// New returns a Source for bucket at endpoint (host:port, TLS when secure).
func New(endpoint, accessKey, secretKey, bucket string, secure bool) (*Source, error) {
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, ""), Secure: secure})
	if err != nil {
		return nil, fmt.Errorf("s3 client %s: %w", endpoint, err)
	}
	return &Source{client: c, bucket: bucket}, nil
}

// Text returns the object at key: knowledge.ErrNotFound when it does not
// exist, knowledge.ErrUnavailable when storage cannot be reached.
func (s *Source) Text(ctx context.Context, key string) (string, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", classify(s.bucket, key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, maxText))
	if err != nil {
		return "", classify(s.bucket, key, err)
	}
	return string(data), nil
}

func classify(bucket, key string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, minio.NoSuchBucket:
		return fmt.Errorf("get %s/%s: %w", bucket, key, knowledge.ErrNotFound)
	case minio.AccessDenied:
		return fmt.Errorf("get %s/%s: %v", bucket, key, err)
	}
	return fmt.Errorf("get %s/%s: %v: %w", bucket, key, err, knowledge.ErrUnavailable)
}
