package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/agora-platform/agora/pkg/fabric/auth"
	"github.com/agora-platform/agora/pkg/fabric/httpjson"
	"github.com/agora-platform/agora/pkg/fabric/problem"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
)

// Asker answers a question from one tenant's knowledge.
type Asker interface {
	Ask(ctx context.Context, tenantID, question string, topK int) (knowledge.Answer, error)
}

type chatRequest struct {
	Question string `json:"question"`
	TopK     *int   `json:"topK"`
}

type citation struct {
	DocumentID string  `json:"documentId"`
	ChunkID    string  `json:"chunkId"`
	Score      float64 `json:"score"`
}

type chatResponse struct {
	Answer    string     `json:"answer"`
	Citations []citation `json:"citations"`
	Generated bool       `json:"generated"`
}

const maxChatBody = 64 << 10

func handleChat(chat Asker, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims, ok := auth.FromContext(r.Context())
		if !ok {
			problem.Error(w, r, http.StatusUnauthorized, "a bearer token is required")
			return
		}
		var req chatRequest
		if err := httpjson.ReadStrict(w, r, maxChatBody, &req); err != nil {
			problem.Fail(w, r, log, err)
			return
		}
		topK := knowledge.DefaultTopK
		if req.TopK != nil {
			topK = *req.TopK
		}
		ans, err := chat.Ask(r.Context(), claims.TenantID, req.Question, topK)
		switch {
		case errors.Is(err, knowledge.ErrUnavailable):
			log.WarnContext(r.Context(), "chat dependency unavailable", "err", err)
			problem.Error(w, r, http.StatusServiceUnavailable, "the answer service is unavailable; try again")
			return
		case err != nil:
			problem.Fail(w, r, log, err)
			return
		}
		resp := chatResponse{Answer: ans.Text, Citations: make([]citation, len(ans.Citations)), Generated: ans.Generated}
		for i, c := range ans.Citations {
			resp.Citations[i] = citation{DocumentID: c.DocumentID, ChunkID: c.ChunkID, Score: c.Score}
		}
		httpjson.Write(w, http.StatusOK, resp)
	})
}
