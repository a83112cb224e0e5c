"""POST /v1/embeddings: OpenAI's Embeddings API over the core's EmbeddingsService."""
