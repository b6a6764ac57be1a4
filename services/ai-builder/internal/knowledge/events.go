package knowledge

import (
	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Producer names this service in the envelopes it emits.
const Producer = "ai-builder"

// IndexedEvent derives ai.knowledge-indexed.v1, announcing that doc is
// indexed, from cause, the command that asked for it.
func IndexedEvent(cause envelope.Envelope, doc Document) (envelope.Envelope, error) {
	p := payload.KnowledgeIndexed{
		DocumentID: doc.DocumentID, RequestID: doc.RequestID, Chunks: len(doc.Chunks), Embedder: doc.Embedder, Dimensions: doc.Dimensions,
	}
	return envelope.Derive(cause, p.MessageType(), Producer, p)
}
