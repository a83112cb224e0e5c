"""How long prompt-cache entries are kept: the clients' lifetimes as the decoders read them
(Anthropic `cache_control.ttl`, OpenAI `prompt_cache_breakpoint.ttl`, `prompt_cache_options` and
`prompt_cache_retention`), which lifetime each entry of a request takes, and the memory tier's
entries expiring on an injected clock, refreshed on use."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.http_facade.anthropic.to_proto import messages_from_json
from mlx_responses.http_facade.chat.to_proto import chat_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError
from mlx_responses.http_facade.responses.to_proto import params_from_json
from mlx_responses.service.engine.mlx_lm_compat import KVCache, RotatingKVCache
from mlx_responses.service.engine.prompt_cache.expiry import ExpiringPromptCache
from mlx_responses.service.text.cache_breakpoints import Mark, mark_retention
from mlx_responses.service.text.key_prefixes import KeyPrefixes
from mlx_responses.service.text.retention import UNBOUNDED, Retention

from mlx_responses.v1 import responses_pb2 as pb


def _ttls(params: pb.CreateResponseParams) -> list[int | None]:
    return [p.ttl_seconds if p.HasField("ttl_seconds") else None for p in params.cache_breakpoints]


def _request_ttl(params: pb.CreateResponseParams) -> int | None:
    return params.prompt_cache_ttl_seconds if params.HasField("prompt_cache_ttl_seconds") else None


def test_cache_control_ttls_travel_with_their_breakpoints() -> None:
    mark: Any = {"type": "ephemeral"}
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "You are", "cache_control": {**mark, "ttl": "1h"}}],
        "tools": [{"name": "a", "input_schema": {}, "cache_control": {**mark, "ttl": "5m"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": mark}]},
            {"role": "assistant", "content": "hello"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [
                            {"type": "text", "text": "r", "cache_control": {**mark, "ttl": "1h"}}
                        ],
                    }
                ],
            },
        ],
        "cache_control": {**mark, "ttl": "5m"},
    }
    params = messages_from_json(body)
    # system (1h), user block (none), tool_result's inner block (1h), top-level (5m), tool (5m)
    assert _ttls(params) == [3600, None, 3600, 300, 300]
    assert _request_ttl(params) is None and not params.prompt_cache_memory_only


def test_openai_lifetimes_and_the_retention_bound() -> None:
    part: Any = {"type": "input_text", "text": "doc"}
    marked = [
        {**part, "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"}},
        {**part, "prompt_cache_breakpoint": {"mode": "explicit"}},
    ]
    body: Any = {"model": "m", "input": [{"role": "user", "content": marked}]}
    plain = params_from_json(body)
    assert _ttls(plain) == [43200, None] and _request_ttl(plain) is None
    timed = params_from_json({**body, "prompt_cache_options": {"ttl": "30m", "mode": "explicit"}})
    assert _ttls(timed) == [43200, None] and _request_ttl(timed) == 1800
    # `in_memory`: an hour at most, for every entry, and none on disk.
    memory = params_from_json(
        {**body, "prompt_cache_options": {"ttl": "12h"}, "prompt_cache_retention": "in_memory"}
    )
    assert _ttls(memory) == [3600, None] and _request_ttl(memory) == 3600
    assert memory.prompt_cache_memory_only
    day = params_from_json({**body, "prompt_cache_retention": "24h"})
    assert _ttls(day) == [43200, None] and _request_ttl(day) == 86400
    assert not day.prompt_cache_memory_only
    chat = chat_from_json(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "prompt_cache_retention": "in_memory",
        }
    ).params
    assert _request_ttl(chat) == 3600 and chat.prompt_cache_memory_only


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"prompt_cache_retention": "forever"}, "prompt_cache_retention"),
        ({"prompt_cache_retention": {}}, "prompt_cache_retention"),
        ({"prompt_cache_options": {"ttl": ["30m"], "mode": {}}}, "prompt_cache_options.mode"),
        ({"prompt_cache_options": {"ttl": "5m"}}, "prompt_cache_options.ttl"),
        ({"prompt_cache_options": {"mode": "sometimes"}}, "prompt_cache_options.mode"),
        ({"prompt_cache_options": "30m"}, "prompt_cache_options"),
    ],
)
def test_a_malformed_lifetime_is_a_400(fields: dict[str, Any], param: str) -> None:
    for decode, body in (
        (params_from_json, {"model": "m", "input": "hi", **fields}),
        (chat_from_json, {"model": "m", "messages": [{"role": "user", "content": "x"}], **fields}),
    ):
        with pytest.raises(OpenAIError) as caught:
            decode(body)
        assert caught.value.status == 400 and caught.value.param == param


def test_each_entry_lives_as_the_first_mark_at_or_after_its_end() -> None:
    marks = [Mark(item=0, ttl=3600), Mark(item=2, chars=5), Mark(item=2, ttl=300)]
    kept = mark_retention(marks, [40, 90, 120], request_ttl=1800, memory_only=False, merged=False)
    assert kept.points == ((40, 3600), (90, 1800), (120, 300))
    assert [kept.ttl(end) for end in (30, 40, 41, 90, 100, 120, 500)] == [
        3600,
        3600,
        1800,
        1800,
        300,
        300,
        300,  # past every mark (the finished turn): the deepest mark's
    ]
    # The tools render after the system text here: the deepest mark is the tool's.
    tool_last = mark_retention(
        [Mark(tool="t", ttl=300), Mark(item=0, chars=10, ttl=3600)],
        [80, 40],
        request_ttl=None,
        memory_only=False,
        merged=False,
    )
    assert tool_last.points == ((40, 3600), (80, 300)) and tool_last.ttl(500) == 300
    # One entry holding every marked prefix (a trimmable cache) lives as the longest-lived.
    merged = mark_retention(marks, None, request_ttl=1800, memory_only=False, merged=True)
    assert merged.points == () and merged.ttl(500) == 3600
    # A mark stating nothing, with no request ttl: no expiry, the longest of all.
    open_ended = mark_retention(
        [Mark(item=0, ttl=300), Mark(item=1)],
        None,
        request_ttl=None,
        memory_only=False,
        merged=True,
    )
    assert open_ended.ttl(10) is None and not open_ended.bounded
    # No marks: the request's own; none stated: today's LRU-only entries.
    assert Retention.of(1800, [], merged=False).ttl(10) == 1800
    assert UNBOUNDED.ttl(10) is None and not UNBOUNDED.bounded


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _cache(n: int, cls: type = KVCache) -> list[Any]:
    layer = cls() if cls is KVCache else cls(max_size=4)
    keys = mx.zeros((1, 1, n, 2))
    layer.update_and_fetch(keys, keys)
    return [layer]


@pytest.mark.parametrize("trimmable", [True, False])
def test_memory_entries_expire_after_their_ttl_and_a_use_refreshes_them(trimmable: bool) -> None:
    clock = _Clock()
    cache = ExpiringPromptCache(8, 1 << 30, clock)
    kind = KVCache if trimmable else RotatingKVCache
    cache.insert_cache("m", [1, 2, 3, 4, 5, 6], _cache(6, kind), ttl=300)
    cache.insert_cache("m", [7, 8, 9, 10, 11, 12], _cache(6, kind))  # no hint: LRU only
    prompt = [1, 2, 3, 4, 5, 6, 20, 21]

    def read(tokens: list[int]) -> int:
        found, rest = cache.fetch_nearest_cache("m", tokens)
        return 0 if found is None else len(tokens) - len(rest)

    clock.now += 299
    assert read(prompt) == 6  # within its ttl: read, and refreshed
    clock.now += 299
    assert read(prompt) == 6  # 598 s after the write, 299 after the last use
    clock.now += 300
    assert read(prompt) == 0  # 300 s unused: expired, never served
    assert cache.expired == 1 and len(cache) == 1
    clock.now += 10**6
    assert read([7, 8, 9, 10, 11, 12, 30]) == 6  # the unhinted entry stays
    assert cache.nbytes == sum(c.nbytes for c in _cache(6, kind))


def test_a_rewrite_takes_the_latest_lifetime() -> None:
    clock = _Clock()
    cache = ExpiringPromptCache(8, 1 << 30, clock)
    tokens = [1, 2, 3, 4]
    cache.insert_cache("m", tokens, _cache(4, RotatingKVCache), ttl=60)
    cache.insert_cache("m", tokens, _cache(4, RotatingKVCache))  # written again, no hint
    clock.now += 3600
    found, _ = cache.fetch_nearest_cache("m", [*tokens, 5])
    assert found is not None


def test_a_keys_prompts_part_where_they_share_a_prefix() -> None:
    prefixes = KeyPrefixes(max_keys=2)
    doc = list(range(100, 200))
    assert prefixes.part("", "doc", [*doc, 1, 2, 3]) == 0  # the key's first prompt
    assert prefixes.part("", "doc", [*doc, 4, 5, 6]) == 100  # parts after the document
    assert prefixes.part("", "other", [*doc, 4, 5, 6]) == 0  # another key shares nothing
    assert prefixes.part("owner-b", "doc", [*doc, 4, 5, 6]) == 0  # another owner's key
    # Bounded: "doc" (the least recently used of three) was dropped.
    assert prefixes.part("", "doc", [*doc, 7]) == 0
    # A prompt extending the last whole: the last's own entries serve it, no checkpoint.
    assert prefixes.part("", "doc", [*doc, 7, 8, 9]) == 0
