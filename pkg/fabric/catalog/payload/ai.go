package payload

// KnowledgeIndex is the command ai.knowledge.index.v1: index the text of a
// document stored at TextObjectKey.
type KnowledgeIndex struct {
	DocumentID    string `json:"documentId"`
	RequestID     string `json:"requestId,omitempty"`
	TextObjectKey string `json:"textObjectKey"`
	Language      string `json:"language,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (KnowledgeIndex) MessageType() string { return "ai.knowledge.index.v1" }

// KnowledgeIndexed is ai.knowledge-indexed.v1.
type KnowledgeIndexed struct {
	DocumentID string `json:"documentId"`
	RequestID  string `json:"requestId,omitempty"`
	Chunks     int    `json:"chunks"`
	Embedder   string `json:"embedder"`
	Dimensions int    `json:"dimensions,omitempty"`
}

// MessageType returns the catalog type of the payload.
func (KnowledgeIndexed) MessageType() string { return "ai.knowledge-indexed.v1" }
