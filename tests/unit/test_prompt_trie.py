"""The indexed prompt trie answers every search exactly as mlx-lm's own trie does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_responses.service.engine.mlx_lm_compat import KVCache, LRUPromptCache, PromptTrie
from mlx_responses.service.engine.prompt_cache.trie import IndexedPromptTrie, new_prompt_cache

# A small alphabet and short sequences: shared prefixes, prefixes of each other, equal-length
# ties below one node, sequences ending inside others.
TOKENS = st.lists(st.integers(0, 3), max_size=7)
OPS = st.lists(
    st.tuples(st.sampled_from(["add", "pop", "pop_prefixes"]), st.sampled_from(["a", "b"]), TOKENS),
    max_size=30,
)


def _apply(tries: tuple[PromptTrie, PromptTrie], op: str, model: str, tokens: list[int]) -> None:
    ours, theirs = tries
    if op == "add":
        assert ours.add(model, tokens, tuple(tokens)) == theirs.add(model, tokens, tuple(tokens))
    elif op == "pop":
        try:
            expected = theirs.pop(model, list(tokens))
        except (KeyError, IndexError):
            return  # not held: mlx-lm's pop fails (the LRU cache never asks for that)
        assert ours.pop(model, list(tokens)) == expected
    elif _has_path(theirs, model, tokens):  # the LRU cache drops prefixes of what it holds
        assert ours.pop_prefixes(model, list(tokens)) == theirs.pop_prefixes(model, list(tokens))


def _has_path(trie: PromptTrie, model: str, tokens: list[int]) -> bool:
    node = trie._trie.get(model)
    for token in tokens:
        if node is None:
            return False
        node = node.get(token)
    return node is not None


@settings(max_examples=400, deadline=None)
@given(OPS, st.lists(TOKENS, min_size=1, max_size=8))
def test_every_search_matches_mlx_lm(
    ops: list[tuple[str, str, list[int]]], queries: list[list[int]]
) -> None:
    ours, theirs = IndexedPromptTrie(), PromptTrie()
    for op, model, tokens in ops:
        _apply((ours, theirs), op, model, tokens)
        for query in queries:
            for model_ in ("a", "b"):
                assert ours.search(model_, list(query)) == theirs.search(model_, list(query))


def test_ties_are_broken_as_mlx_lm_walks() -> None:
    ours, theirs = IndexedPromptTrie(), PromptTrie()
    for tokens in ([1, 2, 5, 6], [1, 2, 7, 8], [1, 2, 9], [1, 3, 4, 4]):
        ours.add("m", tokens, 0)
        theirs.add("m", tokens, 0)
    for query in ([1, 2, 0], [1, 0], [1], [1, 2, 9, 9]):
        assert ours.search("m", query) == theirs.search("m", query)
    assert ours.search("m", [1, 2, 0]).longer == [1, 2, 9]


def test_the_lru_cache_fetches_the_same_entries() -> None:
    ours, theirs = new_prompt_cache(4, 1 << 30), LRUPromptCache(4, 1 << 30)
    assert isinstance(ours._trie, IndexedPromptTrie)
    sequences = [[1, 2, 3, 4, 5], [1, 2, 3, 9], [1, 2, 7, 7, 7, 7], [8, 8], [1, 2, 3, 9, 9, 9]]
    for tokens in sequences:  # the fifth evicts the oldest and drops its own prefix [1, 2, 3, 9]
        for cache in (ours, theirs):
            cache.insert_cache("m", list(tokens), [KVCache()])
    assert len(ours) == len(theirs)
    for query in ([1, 2, 3, 0], [1, 2, 7, 7], [8, 8, 8], [1, 2, 3, 9, 9, 9], [5]):
        got, expected = ours.fetch_nearest_cache("m", query), theirs.fetch_nearest_cache("m", query)
        assert (got[0] is None, got[1]) == (expected[0] is None, expected[1])


class _Counted(dict[Any, Any]):
    """A trie node that counts the reads of its children (`node[token]`), all nodes in one."""

    reads = 0

    def __getitem__(self, key: Any) -> Any:
        _Counted.reads += 1
        return super().__getitem__(key)


def _counted(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    return _Counted({key: _counted(child) for key, child in node.items()})


def test_a_search_does_not_walk_the_cached_tails() -> None:
    """32 cached turns of 300 tokens diverging after 14: mlx-lm walks ~9,000 nodes; ours reads
    the shared prefix's 14 and finds the shortest extension in its index."""
    ours, theirs = IndexedPromptTrie(), PromptTrie()
    head = list(range(14))
    for entry in range(32):
        tokens = head + [1000 + entry * 300 + i for i in range(290)]
        ours.add("m", tokens, 0)
        theirs.add("m", tokens, 0)
    query = [*head, 7, 7, 7]
    reads = []
    for trie in (ours, theirs):
        trie._trie["m"] = _counted(trie._trie["m"])
        _Counted.reads = 0
        result = trie.search("m", query)
        reads.append(_Counted.reads)
        assert result.longer is not None and len(result.longer) == 304
    assert ours.search("m", query) == theirs.search("m", query)
    assert reads[0] == len(head)
    assert reads[1] >= 32 * 290
