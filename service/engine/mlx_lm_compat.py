"""Every piece of mlx-lm the engine uses, imported in one place, and the internals it relies on.

The engine builds on mlx-lm's models, caches and batch generator, and reaches past their public
API in places (the batch generator's queues and counters, the generation batch's per-sequence
state, the batch KV cache's padding protocol). Those names move between mlx-lm releases, so
they are listed here: `tests/unit/test_mlx_lm_compat.py` checks each against the installed
mlx-lm and fails by name when one is gone, before a request does.
"""

from __future__ import annotations

from mlx_lm import load
from mlx_lm.generate import BatchGenerator, GenerationBatch, PromptProcessingBatch
from mlx_lm.models.base import create_causal_mask
from mlx_lm.models.cache import (
    BatchKVCache,
    KVCache,
    LRUPromptCache,
    PromptTrie,
    PromptTrieResult,
    QuantizedKVCache,
    RotatingKVCache,
    can_trim_prompt_cache,
    dynamic_roll,
    make_prompt_cache,
    trim_prompt_cache,
)
from mlx_lm.sample_utils import (
    apply_top_k,
    apply_top_p,
    greedy_sampler,
    make_frequency_penalty,
    make_presence_penalty,
    make_sampler,
)
from mlx_lm.tokenizer_utils import TokenizerWrapper

__all__ = [
    "BATCH_GENERATOR_INTERNALS",
    "BATCH_KV_CACHE_INTERNALS",
    "GENERATION_BATCH_INTERNALS",
    "KEYWORDS",
    "KV_CACHE_INTERNALS",
    "PROMPT_CACHE_INTERNALS",
    "PROMPT_TRIE_INTERNALS",
    "BatchGenerator",
    "BatchKVCache",
    "GenerationBatch",
    "KVCache",
    "LRUPromptCache",
    "PromptProcessingBatch",
    "PromptTrie",
    "PromptTrieResult",
    "QuantizedKVCache",
    "RotatingKVCache",
    "TokenizerWrapper",
    "apply_top_k",
    "apply_top_p",
    "can_trim_prompt_cache",
    "create_causal_mask",
    "dynamic_roll",
    "greedy_sampler",
    "load",
    "make_frequency_penalty",
    "make_presence_penalty",
    "make_prompt_cache",
    "make_sampler",
    "trim_prompt_cache",
]

# Attributes of a BatchGenerator instance the worker reads or sets (service/engine/worker.py).
BATCH_GENERATOR_INTERNALS = (
    "_generation_batch",  # swapped for our grammar / speculative batch
    "_prompt_batch",  # prompts being prefilled (fair prefill sizing; swapped for ours)
    "_unprocessed_sequences",  # prompts not started yet (fair prefill sizing)
    "_counters",  # .prompt_tokens: prefill done between decode steps
    "prefill_batch_size",
    "prefill_step_size",  # set per step by fair prefill
    "prompt_cache_nbytes",  # the live caches' bytes, against the prompt cache budget
    "sampler",
    "stream",  # the solo sequence decodes on the batch's stream
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

# What the slots engine reads and sets on prompt-cache entries (service/engine/slots.py); its own
# caches speak the protocol mlx-lm's attention layers call: `offset`, `update_and_fetch`,
# `make_mask` (checked end to end by tests/engine/test_slots.py). The prompt cache's disk tier
# (prompt_disk.py) writes each entry's `state` and rebuilds it with `from_state` (round trips
# checked by tests/engine/test_prompt_disk.py).
KV_CACHE_INTERNALS = (
    "keys",
    "values",
    "offset",
    "state",
    "from_state",
    "make_mask",
    "update_and_fetch",
)

# The prompt cache's trie, which service/engine/prompt_trie.py replaces with an indexed one: the
# attribute that holds it, and what the subclass overrides or reads (mlx-lm's nested-dict nodes,
# "__value__" marking a sequence's end, are read by the restated search).
PROMPT_CACHE_INTERNALS = ("_trie",)
PROMPT_TRIE_INTERNALS = ("_trie", "add", "pop", "pop_prefixes", "search", "get")

# Keyword arguments the engine passes, by callable.
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
    "mlx_lm.models.cache.LRUPromptCache.fetch_nearest_cache": (),
    "mlx_lm.models.cache.LRUPromptCache.insert_cache": (),
    "mlx_lm.models.cache.LRUPromptCache.trim_to": ("n_bytes",),
    "mlx_lm.sample_utils.make_sampler": ("temp", "top_p", "top_k"),
}
