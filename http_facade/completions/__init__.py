"""Legacy OpenAI Completions (raw prompt, no chat template) over the GenerationService."""
