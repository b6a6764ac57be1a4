package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 returns a client of the stack's object store (the S3_* of Vars), so a
// test can look behind the service: at what it stored, not at what its
// API says about it. It contacts the store only when used.
func (s *Stack) S3(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Vars["S3_ENDPOINT"], &minio.Options{
		Creds: credentials.NewStaticV4(s.Vars["S3_ACCESS_KEY"], s.Vars["S3_SECRET_KEY"], "")})
	if err != nil {
		t.Fatalf("deploytest: object store %s: %v", s.Vars["S3_ENDPOINT"], err)
	}
	return c
}

// TempBucket names a bucket of the test's own in the stack's object store
// (prefix and a unique suffix) for the service to create and fill, and
// empties and removes it when the test ends. Call it before Start:
// cleanups run last-in first-out, so the bucket goes after every instance
// has stopped writing to it.
func (s *Stack) TempBucket(t testing.TB, prefix string) string {
	t.Helper()
	bucket := Unique(prefix)
	DropBucketAtCleanup(t, s.S3(t), bucket)
	return bucket
}

// DropBucketAtCleanup empties bucket and removes it when the test ends,
// best effort: a bucket the service never made is no failure.
func DropBucketAtCleanup(t testing.TB, c *minio.Client, bucket string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
			_ = c.RemoveObject(ctx, bucket, o.Key, minio.RemoveObjectOptions{})
		}
		_ = c.RemoveBucket(ctx, bucket)
	})
}
