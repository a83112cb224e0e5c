"""The MLX engine: the one thread that owns MLX, its batch, caches and logits processors."""
