// Command ai-builder indexes document text into per-tenant pgvector
// partitions and answers attendants' questions over it (POST /v1/chat).
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/agora-platform/agora/pkg/fabric/host"
	"github.com/agora-platform/agora/pkg/fabric/objstore"
	"github.com/agora-platform/agora/services/ai-builder/internal/embed"
	"github.com/agora-platform/agora/services/ai-builder/internal/httpapi"
	"github.com/agora-platform/agora/services/ai-builder/internal/knowledge"
	"github.com/agora-platform/agora/services/ai-builder/internal/messaging"
	"github.com/agora-platform/agora/services/ai-builder/internal/openai"
	"github.com/agora-platform/agora/services/ai-builder/internal/postgres"
	"github.com/agora-platform/agora/services/ai-builder/migrations"
)

func main() { host.Main("ai-builder", run) }

type config struct {
	host        host.Config
	bucket      string
	embedder    string // hash | openai
	dimensions  int
	baseURL     string
	apiKey      string
	embedModel  string
	chatModel   string
	aiTimeout   time.Duration
	chunking    knowledge.ChunkOptions
	concurrency int
	efSearch    int
}

func loadConfig(getenv func(string) string) (config, error) {
	hc, err := host.ConfigFrom("ai-builder", ":8085", getenv)
	if err != nil {
		return config{}, err
	}
	get := func(k, def string) string { return cmp.Or(getenv(k), def) }
	atoi := func(k, def string, min int) (int, error) {
		n, err := strconv.Atoi(get(k, def))
		if err != nil || n < min {
			return 0, fmt.Errorf("%s %q: want an integer ≥ %d", k, getenv(k), min)
		}
		return n, nil
	}
	c := config{
		host: hc, bucket: get("DOCUMENTS_BUCKET", "documents"), embedder: get("AI_EMBEDDER", "hash"),
		baseURL: getenv("AI_BASE_URL"), apiKey: getenv("AI_API_KEY"),
		embedModel: get("AI_EMBEDDINGS_MODEL", "text-embedding-3-small"), chatModel: getenv("AI_CHAT_MODEL"),
	}
	if c.dimensions, err = atoi("AI_EMBEDDING_DIMENSIONS", "384", 1); err != nil {
		return config{}, err
	}
	if c.chunking.Target, err = atoi("CHUNK_TARGET_CHARS", "800", 100); err != nil {
		return config{}, err
	}
	if c.chunking.OverlapSentences, err = atoi("CHUNK_OVERLAP_SENTENCES", "1", 0); err != nil {
		return config{}, err
	}
	if c.concurrency, err = atoi("WORKER_CONCURRENCY", "2", 1); err != nil {
		return config{}, err
	}
	if c.efSearch, err = atoi("AI_HNSW_EF_SEARCH", "400", 1); err != nil {
		return config{}, err
	}
	if c.aiTimeout, err = time.ParseDuration(get("AI_TIMEOUT", "30s")); err != nil || c.aiTimeout <= 0 {
		return config{}, fmt.Errorf("AI_TIMEOUT %q: want a positive duration", getenv("AI_TIMEOUT"))
	}
	switch c.embedder {
	case "hash":
	case "openai":
		if c.baseURL == "" {
			return config{}, fmt.Errorf("AI_EMBEDDER=openai needs AI_BASE_URL")
		}
	default:
		return config{}, fmt.Errorf("AI_EMBEDDER %q: want hash or openai", c.embedder)
	}
	if c.chatModel != "" && c.baseURL == "" {
		return config{}, fmt.Errorf("AI_CHAT_MODEL needs AI_BASE_URL")
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, cfg.host, host.Options{
		Migrations: migrations.FS(), NeedsAuth: true, Relay: true,
		OpenAPI: httpapi.OpenAPI,
	}, stdout)
	if err != nil {
		return err
	}
	defer h.Close() // Serve closes it too; Close is idempotent
	store := postgres.New(h.Pool, h.Outbox, cfg.host.Schema, cfg.efSearch)
	dims, err := store.Dimensions(ctx)
	if err != nil {
		return err
	}
	if dims != cfg.dimensions {
		return fmt.Errorf("AI_EMBEDDING_DIMENSIONS is %d but the embedding column has %d dimensions", cfg.dimensions, dims)
	}
	client := openai.Client{BaseURL: cfg.baseURL, APIKey: cfg.apiKey, HTTP: &http.Client{Timeout: cfg.aiTimeout}}
	var embedder knowledge.Embedder = embed.NewHash(cfg.dimensions)
	if cfg.embedder == "openai" {
		embedder = openai.Embedder{Client: client, Model: cfg.embedModel, Dimensions: cfg.dimensions}
	}
	var gen knowledge.Generator
	if cfg.chatModel != "" {
		gen = openai.Generator{Client: client, Model: cfg.chatModel}
	}
	// MaxGet bounds what one document may bring into memory.
	texts, err := objstore.New(objstore.Config{Endpoint: cfg.host.S3Endpoint, AccessKey: cfg.host.S3AccessKey,
		SecretKey: cfg.host.S3SecretKey, MaxGet: 32 << 20})
	if err != nil {
		return err
	}
	if err := messaging.Attach(h, messaging.Deps{Preparer: knowledge.NewIndexer(texts, cfg.bucket, embedder, cfg.chunking), Store: store,
		Concurrency: cfg.concurrency, Log: h.Log}); err != nil {
		return err
	}
	return h.Serve(ctx, httpapi.NewHandler(httpapi.Deps{Auth: h.Verifier, Chat: knowledge.NewChat(embedder, store, gen), Log: h.Log}), nil)
}
