// Package knowledge is the ai-builder's domain: documents become chunks
// with vectors, and questions become answers with citations. It knows
// nothing of Postgres, AMQP or HTTP.
package knowledge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agora-platform/agora/pkg/fabric"
)

// Failure kinds; the messaging edge maps ErrUnavailable to a transient
// failure and ErrForeignObject to a permanent one. ErrInvalid is of the
// fabric's kinds, which say their class and status themselves, as do the
// text store's errors (a missing object is fabric.ErrNotFound).
var (
	// ErrForeignObject: the text key is outside the envelope tenant's prefix.
	ErrForeignObject = errors.New("object outside the tenant's prefix")
	// ErrUnavailable: storage or the embedding service is down; retry later.
	ErrUnavailable = errors.New("dependency unavailable")
	// ErrInvalid: a question or parameter out of range.
	ErrInvalid = fmt.Errorf("%w input", fabric.ErrInvalid)
)

// Embedder turns texts into vectors of one fixed dimension.
type Embedder interface {
	// Embed returns one vector per text, in order; ErrUnavailable when a
	// remote embedder cannot be reached.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Name identifies the embedder (recorded with every chunk).
	Name() string
}

// TextSource reads extracted text (objstore.New's store is one): a missing
// object is of fabric.ErrNotFound's kind, a store that is down a transient
// failure.
type TextSource interface {
	Get(ctx context.Context, bucket, key string) ([]byte, error)
}

// Chunk is one embedded window of a document.
type Chunk struct {
	ID         string
	DocumentID string
	Ordinal    int
	Content    string
	Vector     []float32
}

// Document is a document ready to be stored: its chunks and how they
// were embedded.
type Document struct {
	TenantID   string
	DocumentID string
	RequestID  string
	TextKey    string
	Embedder   string
	Dimensions int
	Chunks     []Chunk
}

// IndexRequest is what ai.knowledge.index.v1 asks for.
type IndexRequest struct {
	DocumentID    string
	RequestID     string
	TextObjectKey string
}

// Indexer prepares documents for the tenant's vector partition.
type Indexer struct {
	texts    TextSource
	bucket   string
	embedder Embedder
	chunking ChunkOptions
	batch    int
}

// NewIndexer returns an Indexer.
func NewIndexer(texts TextSource, bucket string, embedder Embedder, chunking ChunkOptions) *Indexer {
	return &Indexer{texts: texts, bucket: bucket, embedder: embedder, chunking: chunking, batch: 64}
}

// TenantPrefix is the object-key prefix of tenantID's objects.
func TenantPrefix(tenantID string) string { return "tenant=" + tenantID + "/" }

// ChunkID is a chunk's stable id: re-indexing the same document yields
// the same ids for the same positions.
func ChunkID(documentID string, ordinal int) string {
	ns, err := uuid.Parse(documentID)
	if err != nil {
		ns = uuid.NameSpaceOID
		documentID += "/"
	} else {
		documentID = ""
	}
	return uuid.NewSHA1(ns, []byte(documentID+strconv.Itoa(ordinal))).String()
}

// Prepare reads r's text for tenantID (the envelope's tenant: a key outside
// its prefix is ErrForeignObject), chunks and embeds it. Errors wrap
// ErrForeignObject, ErrUnavailable or the text store's errors.
func (ix *Indexer) Prepare(ctx context.Context, tenantID string, r IndexRequest) (Document, error) {
	if !strings.HasPrefix(r.TextObjectKey, TenantPrefix(tenantID)) || strings.Contains(r.TextObjectKey, "..") {
		return Document{}, fmt.Errorf("document %s: key %q for tenant %s: %w", r.DocumentID, r.TextObjectKey, tenantID, ErrForeignObject)
	}
	data, err := ix.texts.Get(ctx, ix.bucket, r.TextObjectKey)
	text := string(data)
	if err != nil {
		return Document{}, fmt.Errorf("document %s: read text: %w", r.DocumentID, err)
	}
	parts := Split(text, ix.chunking)
	doc := Document{TenantID: tenantID, DocumentID: r.DocumentID, RequestID: r.RequestID, TextKey: r.TextObjectKey,
		Embedder: ix.embedder.Name(), Chunks: make([]Chunk, 0, len(parts))}
	for start := 0; start < len(parts); start += ix.batch {
		end := min(start+ix.batch, len(parts))
		vecs, err := ix.embedder.Embed(ctx, parts[start:end])
		if err != nil {
			return Document{}, fmt.Errorf("document %s: embed chunks %d-%d: %w", r.DocumentID, start, end-1, err)
		}
		for i, v := range vecs {
			n := start + i
			doc.Chunks = append(doc.Chunks, Chunk{ID: ChunkID(r.DocumentID, n), DocumentID: r.DocumentID, Ordinal: n, Content: parts[n], Vector: v})
			doc.Dimensions = len(v)
		}
	}
	return doc, nil
}
