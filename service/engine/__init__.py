"""The MLX engine: model loading, prompt rendering, the generation worker thread and parsers."""
