"""Request limits the core enforces and the façade documents (/openapi.json): stdlib only, so
the façade may import them without importing the core."""

from __future__ import annotations

MAX_TOP_LOGPROBS = 20
MAX_COMPACT_THRESHOLD = 100_000_000
# `reasoning.summary`: each makes reasoning items carry their text as the summary.
REASONING_SUMMARIES = ("auto", "concise", "detailed")
MAX_STOP_SEQUENCES = 16
# Conversations: items per create/add call, metadata pairs and their key/value lengths.
MAX_ITEMS_PER_CALL = 20
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
