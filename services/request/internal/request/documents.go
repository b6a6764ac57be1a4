package request

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
)

// DocumentStore is the storage the document flow needs.
type DocumentStore interface {
	// Get returns the request if a may see it, or ErrNotFound.
	Get(ctx context.Context, a Actor, id string) (Request, error)
	// AddDocument stores d and enqueues document.uploaded.v1 in one
	// transaction.
	AddDocument(ctx context.Context, a Actor, r Request, d Document) error
}

// Blobs stores objects (objstore.New's store is one).
type Blobs interface {
	// Put streams body (size -1: unknown) to bucket/key; it returns body's
	// read error if any.
	Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) error
	Remove(ctx context.Context, bucket, key string) error
}

// Documents attaches files to requests: bytes to object storage, the
// record and its event to the database.
type Documents struct {
	store  DocumentStore
	blobs  Blobs
	bucket string
	now    func() time.Time
}

// NewDocuments returns the document flow over store and blobs (the bucket
// named bucket).
func NewDocuments(store DocumentStore, blobs Blobs, bucket string, now func() time.Time) *Documents {
	return &Documents{store: store, blobs: blobs, bucket: bucket, now: now}
}

// Upload is one file as received.
type Upload struct {
	FileName    string
	ContentType string // already sniffed and allowed
	Body        io.Reader
	MaxSize     int64 // Upload fails with ErrTooLarge beyond this many bytes
}

// Upload stores u for request requestID. It returns ErrNotFound when a may
// not see the request, ErrTooLarge beyond u.MaxSize, or a wrapped storage
// error. The object is deleted again if the database transaction fails, so
// no unreferenced object stays behind (except if that delete fails too,
// which is logged by the caller through the returned error).
func (s *Documents) Upload(ctx context.Context, a Actor, requestID string, u Upload) (Document, error) {
	r, err := s.store.Get(ctx, a, requestID)
	if err != nil {
		return Document{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Document{}, fmt.Errorf("document id: %w", err)
	}
	name := SanitizeFileName(u.FileName)
	d := Document{
		ID: id.String(), RequestID: r.ID, Bucket: s.bucket,
		ObjectKey:   ObjectKey(r.TenantID, r.ID, id.String(), name),
		FileName:    name,
		ContentType: u.ContentType,
		UploadedBy:  a.Subject,
	}
	cr := &countingReader{r: u.Body, h: sha256.New(), max: u.MaxSize}
	if err := s.blobs.Put(ctx, s.bucket, d.ObjectKey, cr, -1, d.ContentType); err != nil {
		if cr.exceeded {
			return Document{}, ErrTooLarge
		}
		return Document{}, fmt.Errorf("store object %s: %w", d.ObjectKey, err)
	}
	d.Size, d.SHA256, d.UploadedAt = cr.n, hex.EncodeToString(cr.h.Sum(nil)), s.now().UTC()
	if err := s.store.AddDocument(ctx, a, r, d); err != nil {
		// The row was not committed: the object would be an orphan.
		if rmErr := s.blobs.Remove(context.WithoutCancel(ctx), s.bucket, d.ObjectKey); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove orphan object %s: %w", d.ObjectKey, rmErr))
		}
		return Document{}, fmt.Errorf("record document %s: %w", d.ID, err)
	}
	return d, nil
}

// ObjectKey is where a document's bytes live: under the tenant's prefix,
// so storage policies can isolate tenants by prefix.
func ObjectKey(tenantID, requestID, documentID, fileName string) string {
	return "tenant=" + tenantID + "/requests/" + requestID + "/documents/" + documentID + "/" + fileName
}

// SanitizeFileName keeps the base name of a client-supplied file name with
// only letters, digits, '.', '_' and '-' (others become '_'), at most 100
// bytes, and never empty or a dot name.
func SanitizeFileName(name string) string {
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	var b strings.Builder
	for _, r := range name {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)), r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	out := strings.TrimLeft(b.String(), ".")
	if out == "" {
		return "file"
	}
	return out
}

// countingReader hashes and counts what passes through and fails once more
// than max bytes were read.
type countingReader struct {
	r        io.Reader
	h        hash.Hash
	n, max   int64
	exceeded bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	if c.max > 0 && c.n > c.max {
		c.exceeded = true
		return n, ErrTooLarge
	}
	return n, err
}
