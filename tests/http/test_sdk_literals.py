"""Every enum value that the installed OpenAI and Anthropic SDKs can send is accepted:
honoured, or ignored as docs/api/index.md lists, never a 400 for being new.

The values are read from the SDKs' own request types (their `Literal`s, through nested
TypedDicts and the alternatives of each union), so upgrading an SDK in `make setup` re-runs this
against what it now sends. Each value is sent inside the smallest object its TypedDict allows
(its other required keys filled), on a request that is otherwise minimal.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import httpx
import pytest
from anthropic.types import message_create_params
from anthropic.types.beta import message_create_params as beta_message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from typing_extensions import is_typeddict  # the SDKs' TypedDicts are typing_extensions'

from tests.support.stack import Stack

Path = tuple[str, ...]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
# Values for the required keys of an object that are not literals, by key name.
SAMPLES: dict[str, Any] = {
    "schema": SCHEMA,
    "name": "answer",
    "json_schema": {"name": "answer", "schema": SCHEMA},
    "budget_tokens": 1024,
    "keep_tokens": 1,
}


def _members(t: Any) -> list[Any]:
    """The alternatives of a type: a Union's members, else the type itself (Required,
    NotRequired and Annotated unwrapped)."""
    origin = get_origin(t)
    if origin is Union or origin is types.UnionType:
        return [m for a in get_args(t) for m in _members(a)]
    if getattr(origin, "__name__", "") in ("Required", "NotRequired", "Annotated"):
        return _members(get_args(t)[0])
    return [t]


def _literal(hint: Any) -> str | None:
    """The first string literal a field admits, if it admits one."""
    for member in _members(hint):
        if get_origin(member) is Literal:
            return next((v for v in get_args(member) if isinstance(v, str)), None)
    return None


def _skeleton(td: Any) -> dict[str, Any]:
    """The smallest value of TypedDict `td`: its required keys, literals at their first value."""
    hints = get_type_hints(td, include_extras=True)
    out: dict[str, Any] = {}
    # Under `from __future__ import annotations` the class cannot see `Required[...]`: read it.
    required = set(getattr(td, "__required_keys__", ())) | {
        k for k, h in hints.items() if getattr(get_origin(h), "__name__", "") == "Required"
    }
    for key in sorted(required):
        literal = _literal(hints[key])
        if literal is not None:
            out[key] = literal
        elif key in SAMPLES:
            out[key] = SAMPLES[key]
    return out


def literal_cases(td: Any, depth: int = 0) -> Iterator[tuple[Path, dict[str, Any], str]]:
    """(path, object at that path, value): each string literal reachable through nested
    TypedDicts (not lists), the object being the skeleton of its TypedDict with that value."""
    if depth > 3:
        return
    hints = get_type_hints(td, include_extras=True)
    base = _skeleton(td)
    for key, hint in hints.items():
        for member in _members(hint):
            if get_origin(member) is Literal:
                for value in get_args(member):
                    if isinstance(value, str):
                        yield (key,), {**base, key: value}, value
            elif is_typeddict(member):
                for path, inner, value in literal_cases(member, depth + 1):
                    yield (key, *path), {**base, key: inner}, value


# What the server refuses on purpose: (api, path, value) -> why (the seed or the docs).
REFUSED: dict[tuple[str, Path, str], str] = {
    ("responses", ("truncation",), "auto"): "the seed: only 'disabled'; any other value is a 400",
}
# Fields whose values are item or tool shapes (covered by the client-library suites), select a
# resource by id, or name a model (any name a client sends is looked up, not validated).
SKIP = {
    "model", "input", "messages", "tools", "tool_choice", "functions", "function_call",
    "conversation", "prompt", "previous_response_id", "audio", "prediction", "mcp_servers",
    "container", "fallbacks", "web_search_options",
}  # fmt: skip
SOURCES = {
    "responses": response_create_params.ResponseCreateParamsBase,
    "chat": completion_create_params.CompletionCreateParamsBase,
    "messages": message_create_params.MessageCreateParamsBase,
    "messages-beta": beta_message_create_params.MessageCreateParamsBase,
}


def _cases() -> list[Any]:
    out, seen = [], set()
    for api, params in SOURCES.items():
        for path, body, value in literal_cases(params):
            key = (api, path, value)
            if path[0] in SKIP or key in seen:
                continue
            seen.add(key)
            out.append(pytest.param(api, path, body, id=f"{api}:{'.'.join(path)}={value}"))
    return out


CASES = _cases()


def _request(api: str, model: str, fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    fields = {k: v for k, v in fields.items() if k not in ("model", "input", "messages")}
    if api == "responses":
        return "/v1/responses", {"model": model, "input": "hi", "max_output_tokens": 4, **fields}
    user = [{"role": "user", "content": "hi"}]
    if api == "chat":
        return "/v1/chat/completions", {"model": model, "messages": user, "max_tokens": 4, **fields}
    url = "/v1/messages?beta=true" if api == "messages-beta" else "/v1/messages"
    return url, {"model": model, "messages": user, "max_tokens": 4, **fields}


def test_the_walk_finds_the_newest_values() -> None:
    found = {(c.values[0], ".".join(c.values[1])) for c in CASES}
    for expected in [
        ("responses", "service_tier"),
        ("responses", "prompt_cache_retention"),
        ("responses", "reasoning.effort"),
        ("responses", "text.format.type"),
        ("chat", "reasoning_effort"),
        ("chat", "response_format.type"),
        ("messages", "thinking.type"),
        ("messages-beta", "service_tier"),
    ]:
        assert expected in found
    assert len(CASES) > 60


@pytest.mark.parametrize(("api", "path", "fields"), CASES)
def test_no_sdk_value_is_refused_for_being_new(
    stack: Stack, api: str, path: Path, fields: dict[str, Any]
) -> None:
    node: Any = fields
    for key in path:
        node = node[key]
    url, body = _request(api, stack.settings.models[0].name, fields)
    answer = httpx.post(f"{stack.base_url}{url}", json=body, timeout=120)
    if (api, path, node) in REFUSED:
        assert answer.status_code == 400, answer.text
        return
    assert answer.status_code == 200, f"{'.'.join(path)}={node!r}: {answer.text[:400]}"
