"""mlx-lm's prompt-cache trie with a search that does not walk the cached sequences' tails.

`LRUPromptCache.fetch_nearest_cache` searches its trie for every new request, on the engine
thread, between decode steps. mlx-lm's `PromptTrie.search` finds the shortest cached sequence
that extends the prompt's common prefix by walking every node below that prefix and copying the
path at each one: quadratic in the length of the cached tails (32 cached turns of 300 tokens:
3.8 ms per request on a CPU, a stall of every running stream at each arrival).

Here the trie also keeps its sequences, so that sequence is found by comparing prefixes (C
speed). The result is mlx-lm's own: the shortest sequence below the prefix, and of several
equally short ones the one mlx-lm's walk reaches first.
"""

from __future__ import annotations

from array import array
from typing import Any

from mlx_responses.service.engine.mlx_lm_compat import LRUPromptCache, PromptTrie, PromptTrieResult


class IndexedPromptTrie(PromptTrie):
    """mlx-lm's `PromptTrie` that also holds each model's sequences (for `search`)."""

    def __init__(self) -> None:
        super().__init__()
        # Per model, each sequence as the bytes of its int64 token ids: a prefix test is a
        # memcmp, whatever the lengths.
        self._sequences: dict[Any, dict[bytes, None]] = {}

    def add(self, model: Any, tokens: list[int], value: Any) -> Any:
        self._sequences.setdefault(model, {})[_key(tokens)] = None
        return super().add(model, tokens, value)

    def pop(self, model: Any, tokens: list[int]) -> Any:
        value = super().pop(model, tokens)
        self._sequences[model].pop(_key(tokens), None)
        return value

    def pop_prefixes(self, model: Any, tokens: list[int]) -> list[tuple[int, Any]]:
        values: list[tuple[int, Any]] = super().pop_prefixes(model, tokens)
        sequences = self._sequences.get(model, {})
        for length, _ in values:
            sequences.pop(_key(tokens[:length]), None)
        return values

    def search(self, model: Any, tokens: list[int]) -> PromptTrieResult:
        """mlx-lm's search, with the shortest longer sequence found from the index."""
        if model not in self._trie:
            return PromptTrieResult(model, None, None, None, 0)
        current = self._trie[model]
        if not tokens and "__value__" in current:
            return PromptTrieResult(model, [], None, None, 0)
        last_index = -1
        index = 0
        while index < len(tokens) and tokens[index] in current:
            current = current[tokens[index]]
            if "__value__" in current:
                last_index = index
            index += 1
        if last_index == len(tokens) - 1 >= 0:
            return PromptTrieResult(model, tokens, None, None, 0)
        shorter = tokens[: last_index + 1] if last_index > 0 else None
        longer = self._shortest_extension(model, current, tokens[:index]) if index > 0 else None
        return PromptTrieResult(model, None, shorter, longer, index)

    def _shortest_extension(
        self, model: Any, node: dict[Any, Any], prefix: list[int]
    ) -> list[int] | None:
        """The shortest sequence starting with `prefix` (whose trie node is `node`)."""
        head = _key(prefix)
        shortest: list[bytes] = []
        for sequence in self._sequences.get(model, ()):
            if not sequence.startswith(head):
                continue
            if not shortest or len(sequence) < len(shortest[0]):
                shortest = [sequence]
            elif len(sequence) == len(shortest[0]):
                shortest.append(sequence)
        if not shortest:
            return None  # nothing below `node` (the index and the trie agree: not reached)
        tied = [array(_TYPECODE, sequence).tolist() for sequence in shortest]
        first = tied[0]
        for other in tied[1:]:
            if _walked_before(node, len(prefix), other, first):
                first = other
        return first


_TYPECODE = "q"  # int64: any token id


def _key(tokens: list[int]) -> bytes:
    return array(_TYPECODE, tokens).tobytes()


def _walked_before(node: dict[Any, Any], depth: int, a: list[int], b: list[int]) -> bool:
    """Whether mlx-lm's walk from `node` (at `depth`) reaches `a` before `b`.

    Its walk is depth first, taking a node's children last inserted first (a stack), and
    keeps the first of the shortest: so of two equally long sequences, the one whose token
    where they part was inserted later below that node.
    """
    while a[depth] == b[depth]:
        node = node[a[depth]]
        depth += 1
    children = list(node)
    return children.index(a[depth]) > children.index(b[depth])


def new_prompt_cache(max_entries: int, max_bytes: int) -> LRUPromptCache:
    """mlx-lm's LRU prompt cache over the indexed trie."""
    cache = LRUPromptCache(max_entries, max_bytes)
    cache._trie = IndexedPromptTrie()
    return cache
