"""An embedding model's engine: its load (mlx-embeddings), its batched forward and its thread."""
