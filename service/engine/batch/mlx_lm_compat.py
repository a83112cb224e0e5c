"""The mlx-lm names only the batch engine uses, and the internals it relies on.

The batch engine (this package) builds on mlx-lm's BatchGenerator and reaches past its public
API (the generator's queues and counters, the generation batch's per-sequence state, the batch
KV cache's padding protocol). Those names move between mlx-lm releases, so they are listed
here: `tests/unit/test_mlx_lm_compat.py` checks each against the installed mlx-lm and fails by
name when one is gone, before a request does. Nothing outside `engine/batch/` reads them
(`tests/unit/test_engine_layering.py`); the names the whole engine shares are in
`engine/mlx_lm_compat.py`.
"""

from __future__ import annotations

from mlx_lm.generate import BatchGenerator, GenerationBatch, PromptProcessingBatch
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import BatchKVCache, dynamic_roll

__all__ = [
    "BATCH_GENERATOR_INTERNALS",
    "BATCH_KV_CACHE_INTERNALS",
    "GENERATION_BATCH_INTERNALS",
    "KEYWORDS",
    "BatchGenerator",
    "BatchKVCache",
    "GenerationBatch",
    "PromptProcessingBatch",
    "create_causal_mask",
    "dynamic_roll",
]

# Attributes of a BatchGenerator instance the worker reads or sets (batch/scheduler.py).
BATCH_GENERATOR_INTERNALS = (
    "_generation_batch",  # swapped for our grammar / speculative batch
    "_prompt_batch",  # prompts being prefilled (fair prefill sizing; swapped for ours)
    "_unprocessed_sequences",  # prompts not started yet (fair prefill sizing)
    "_counters",  # .prompt_tokens: prefill done between decode steps
    "prefill_batch_size",
    "prefill_step_size",  # set per step by fair prefill
    "prompt_cache_nbytes",  # the live caches' bytes, against the prompt cache budget
    "sampler",
    "stream",  # a sequence decoded alone runs on the batch's stream
    "insert",
    "remove",
    "next",
    "close",
)

# Attributes of a GenerationBatch instance our subclasses use (grammar_batch.py, speculative.py).
GENERATION_BATCH_INTERNALS = (
    "model",
    "uids",
    "prompt_cache",
    "tokens",
    "samplers",
    "fallback_sampler",
    "logits_processors",
    "max_tokens",
    "_current_tokens",
    "_current_logprobs",
    "_next_tokens",
    "_next_logprobs",
    "_token_context",
    "_num_tokens",
    "_matchers",
    "_step",  # restated by GrammarGenerationBatch
    "next",
    "extend",
    "filter",
    "extract_cache",
    "Response",
    "empty",
)

# The batch KV cache protocol our quantized batch cache restates and speculation drives.
BATCH_KV_CACHE_INTERNALS = (
    "left_padding",
    "offset",
    "_idx",
    "update_and_fetch",
    "prepare",
    "finalize",
    "trim",
    "make_mask",
    "filter",
    "extend",
    "extract",
    "merge",
    "size",
    "nbytes",
)

# Keyword arguments the batch engine passes, by callable.
KEYWORDS = {
    "mlx_lm.generate.BatchGenerator.insert": (
        "max_tokens",
        "caches",
        "all_tokens",
        "samplers",
        "logits_processors",
    ),
    "mlx_lm.generate.BatchGenerator.__init__": (
        "stop_tokens",
        "completion_batch_size",
        "prefill_batch_size",
        "prefill_step_size",
    ),
    "mlx_lm.models.cache.BatchKVCache.prepare": ("right_padding",),
    "mlx_lm.models.base.create_causal_mask": ("offset", "left_padding"),
}
