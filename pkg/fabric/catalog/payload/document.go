package payload

import "github.com/agora-platform/agora/pkg/fabric/enum"

// DocumentUploaded is document.uploaded.v1: a reference to the stored
// object, never its bytes.
type DocumentUploaded struct {
	DocumentID  string `json:"documentId"`
	RequestID   string `json:"requestId"`
	Bucket      string `json:"bucket"`
	ObjectKey   string `json:"objectKey"`
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
}

// MessageType returns the catalog type of the payload.
func (DocumentUploaded) MessageType() string { return "document.uploaded.v1" }

// DocumentProcessed is document.processed.v1.
type DocumentProcessed struct {
	DocumentID    string                      `json:"documentId"`
	RequestID     string                      `json:"requestId"`
	TextObjectKey string                      `json:"textObjectKey"`
	Pages         int                         `json:"pages"`
	Characters    int                         `json:"characters"`
	Language      string                      `json:"language,omitempty"`
	Method        enum.Open[ExtractionMethod] `json:"method"`
	DurationMs    int64                       `json:"durationMs"`
}

// MessageType returns the catalog type of the payload.
func (DocumentProcessed) MessageType() string { return "document.processed.v1" }

// ExtractionMethod is how a document's text was obtained (extensible).
type ExtractionMethod string

// Known reports whether m is a method this build was written for.
func (m ExtractionMethod) Known() bool {
	switch m {
	case "tesseract", "pdftotext", "pdftoppm+tesseract", "plain":
		return true
	}
	return false
}

// DocumentValidated is document.validated.v1: the document worker's verdict
// on an extracted document. Valid says the text is readable; Kind is the
// document kind its keywords suggest (a heuristic, "unknown" when none
// matched); Checks are the tests behind the verdict, in order; Reason says
// why an invalid document is not valid.
type DocumentValidated struct {
	DocumentID string                  `json:"documentId"`
	RequestID  string                  `json:"requestId"`
	Valid      bool                    `json:"valid"`
	Kind       enum.Open[DocumentKind] `json:"kind"`
	Checks     []DocumentCheck         `json:"checks"`
	Reason     string                  `json:"reason,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (DocumentValidated) MessageType() string { return "document.validated.v1" }

// DocumentCheck is one test of a document.validated.v1 verdict.
type DocumentCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// DocumentKind is the detected kind of a document (extensible).
type DocumentKind string

// Known reports whether k is a kind this build was written for.
func (k DocumentKind) Known() bool {
	switch k {
	case "identity", "proof-of-address", "proof-of-income", "unknown":
		return true
	}
	return false
}

// ProcessDocument is document.process.v1: an operator asks for a stored
// document to be processed again.
type ProcessDocument struct {
	DocumentID string `json:"documentId"`
}

// MessageType returns the catalog type of the payload.
func (ProcessDocument) MessageType() string { return "document.process.v1" }
