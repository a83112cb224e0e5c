"""A vision-language model on the shared scheduler: images encoded off the step, prefilled from
embeddings with per-sequence M-RoPE positions, keyed by their content in the prompt cache."""
