package document

import (
	"cmp"

	"github.com/agora-platform/agora/pkg/fabric/catalog/payload"
	"github.com/agora-platform/agora/pkg/fabric/enum"
	"github.com/agora-platform/agora/pkg/fabric/envelope"
)

// Producer names this service in the envelopes it emits.
const Producer = "document-worker"

// Each envelope below is derived from cause, the message that had the
// document processed (an upload event or a reprocessing command).

// ProcessedEvent is document.processed.v1: res's text and how it was read.
func ProcessedEvent(cause envelope.Envelope, res Result) (envelope.Envelope, error) {
	p := payload.DocumentProcessed{
		DocumentID: res.DocumentID, RequestID: res.RequestID, TextObjectKey: res.TextObjectKey,
		Pages: res.Pages, Characters: res.Characters, Language: res.Language,
		Method: enum.Of(payload.ExtractionMethod(res.Method)), DurationMs: res.Duration.Milliseconds(),
	}
	return envelope.Derive(cause, p.MessageType(), Producer, p)
}

// ValidatedEvent is document.validated.v1: res's verdict.
func ValidatedEvent(cause envelope.Envelope, res Result) (envelope.Envelope, error) {
	v := res.Verdict
	checks := make([]payload.DocumentCheck, 0, len(v.Checks))
	for _, c := range v.Checks {
		checks = append(checks, payload.DocumentCheck{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
	}
	p := payload.DocumentValidated{
		DocumentID: res.DocumentID, RequestID: res.RequestID, Valid: v.Valid,
		Kind: enum.Of(payload.DocumentKind(cmp.Or(v.Kind, DocUnknown))), Checks: checks, Reason: v.Reason,
	}
	return envelope.Derive(cause, p.MessageType(), Producer, p)
}

// IndexCommand is ai.knowledge.index.v1: index res's text.
func IndexCommand(cause envelope.Envelope, res Result) (envelope.Envelope, error) {
	p := payload.KnowledgeIndex{
		DocumentID: res.DocumentID, RequestID: res.RequestID, TextObjectKey: res.TextObjectKey, Language: res.Language,
	}
	return envelope.Derive(cause, p.MessageType(), Producer, p)
}
