"""OpenAI Chat Completions (and legacy Completions) as a façade over the GenerationService."""
