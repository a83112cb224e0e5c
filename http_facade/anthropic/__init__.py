"""Anthropic Messages (and count_tokens) as a façade over the GenerationService."""
