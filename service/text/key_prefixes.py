"""What a `prompt_cache_key`'s requests share: a checkpoint where a prompt parts from the last.

A client names requests that share a prefix with one `prompt_cache_key` (OpenAI's hint: Codex
sends its session id, an app its document or its user). On a model whose caches can be trimmed,
an entry serves any prefix of itself, so the shared part is read back whatever it is. On one
whose caches cannot (a sliding window that has rotated, recurrent layers), an entry serves only
the prompts that extend it, so the engine keeps entries at checkpoints (the system turn's end,
marked blocks). The key says more: where this request's prompt parts from the key's previous
prompt is a prefix the key's requests have shared, and will likely share again (questions on
one document, retries that edit the last message, sub-agents under one instruction set), so
that position becomes a checkpoint too: the next request under the key reads through it.

Per model (each runtime keeps its own) and per owner under --isolate-keys; the last prompt of
at most `MAX_KEYS` keys and `MAX_TOKENS` tokens in all, least recently used out first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

MAX_KEYS = 1024
MAX_TOKENS = 4 << 20  # 16 MiB of int32


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


class KeyPrefixes:
    """The last prompt of each key, and where a new prompt parts from it."""

    def __init__(self, max_keys: int = MAX_KEYS, max_tokens: int = MAX_TOKENS) -> None:
        self.max_keys = max_keys
        self.max_tokens = max_tokens
        self._last: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._tokens = 0

    def part(self, scope: str, key: str, prompt: Sequence[int]) -> int:
        """Where `prompt` parts from the last prompt sent under `key` (in `scope`), where that
        is inside both (before the last's last token: an entry of the last prompt's own ends
        there; before this one's last: the decode step feeds it); 0 else. Remembers `prompt` as
        the key's last."""
        tokens = np.asarray(prompt, dtype=np.int32)
        name = (scope, key)
        last = self._last.pop(name, None)
        position = 0
        if last is not None:
            self._tokens -= len(last)
            shared = common_prefix(last, tokens)
            if 0 < shared < min(len(last), len(tokens)) - 1:
                position = shared
        if len(tokens) <= self.max_tokens:
            self._last[name] = tokens
            self._tokens += len(tokens)
        while self._last and (len(self._last) > self.max_keys or self._tokens > self.max_tokens):
            _, dropped = self._last.popitem(last=False)
            self._tokens -= len(dropped)
        return position
