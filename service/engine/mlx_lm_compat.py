"""Every mlx-lm name the engine shares (models, caches, samplers, the prompt cache), in one place.

The batch engine's own names, and mlx-lm's internals it reads, are in
`engine/batch/mlx_lm_compat.py`. `tests/unit/test_mlx_lm_compat.py` checks each name listed in
either against the installed mlx-lm and fails by name when one is gone, before a request does.
"""

from __future__ import annotations

from mlx_lm import load
from mlx_lm.models.base import create_attention_mask, create_ssm_mask
from mlx_lm.models.cache import (
    ArraysCache,
    CacheList,
    KVCache,
    LRUPromptCache,
    PromptTrie,
    PromptTrieResult,
    QuantizedKVCache,
    RotatingKVCache,
    can_trim_prompt_cache,
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
from mlx_lm.utils import load_model as load_architecture
from mlx_lm.utils import load_tokenizer, sharded_load

__all__ = [
    "KEYWORDS",
    "KV_CACHE_INTERNALS",
    "PROMPT_CACHE_INTERNALS",
    "PROMPT_TRIE_INTERNALS",
    "ArraysCache",
    "CacheList",
    "KVCache",
    "LRUPromptCache",
    "PromptTrie",
    "PromptTrieResult",
    "QuantizedKVCache",
    "RotatingKVCache",
    "TokenizerWrapper",
    "apply_top_k",
    "apply_top_p",
    "can_trim_prompt_cache",
    "create_attention_mask",
    "create_ssm_mask",
    "greedy_sampler",
    "load",
    "load_architecture",
    "load_tokenizer",
    "make_frequency_penalty",
    "make_presence_penalty",
    "make_prompt_cache",
    "make_sampler",
    "sharded_load",
    "trim_prompt_cache",
]

# What the slots engine reads and sets on prompt-cache entries (service/engine/slots/); its own
# caches speak the protocol mlx-lm's attention layers call: `offset`, `update_and_fetch`,
# `make_mask` (checked end to end by tests/engine/test_slots.py). The prompt cache's disk tier
# (prompt_cache/disk.py) writes each entry's `state` and rebuilds it with `from_state` (round trips
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

# The prompt cache's trie, which service/engine/prompt_cache/trie.py replaces with an indexed
# one: the attribute that holds it, and what the subclass overrides or reads (mlx-lm's
# nested-dict nodes, "__value__" marking a sequence's end, are read by the restated search).
# service/engine/prompt_cache/expiry.py takes one expired entry out of its LRU order and byte
# counts.
PROMPT_CACHE_INTERNALS = ("_trie", "_lru", "_n_bytes", "_n_bytes_by_type")
PROMPT_TRIE_INTERNALS = ("_trie", "add", "pop", "pop_prefixes", "search", "get")

# Keyword arguments the engine passes, by callable.
KEYWORDS = {
    "mlx_lm.models.cache.LRUPromptCache.fetch_nearest_cache": (),
    "mlx_lm.models.cache.LRUPromptCache.insert_cache": (),
    "mlx_lm.models.cache.LRUPromptCache.trim_to": ("n_bytes",),
    "mlx_lm.sample_utils.make_sampler": ("temp", "top_p", "top_k"),
}
