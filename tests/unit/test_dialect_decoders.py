"""Every dialect's decoder refuses a bad body with a 400 only, and takes what /openapi.json allows.

The property half runs each decoder on thousands of mutated bodies in-process: a decoder may
raise nothing but the façade's 400, and a body the document's request schema accepts must
decode (the document may be stricter than the façade where the core checks more, never looser
than the decoder). MLX_RESPONSES_DECODER_EXAMPLES raises the count.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from mlx_responses.http_facade.anthropic.to_proto import messages_from_json
from mlx_responses.http_facade.app import API_PARTS
from mlx_responses.http_facade.chat.to_proto import chat_from_json
from mlx_responses.http_facade.completions.to_proto import completion_from_json
from mlx_responses.http_facade.kit.errors import OpenAIError, invalid
from mlx_responses.http_facade.kit.json_body import parse_body
from mlx_responses.http_facade.kit.openapi_document import build_document
from mlx_responses.http_facade.responses.conversations import create_from_json
from mlx_responses.http_facade.responses.to_proto import params_from_json

from tests.support.fuzz_bodies import (
    chat_body,
    completion_body,
    conversation_body,
    messages_body,
    mutated,
    responses_body,
)

Decode = Callable[[Any], object]


def _conversation(body: Any) -> object:
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    return create_from_json(body)


# name -> (decoder, a valid body, the request schema of /openapi.json)
DIALECTS: dict[str, tuple[Decode, Callable[[str], dict[str, Any]], str]] = {
    "responses": (params_from_json, responses_body, "CreateResponseRequest"),
    "messages": (messages_from_json, messages_body, "AnthropicMessageRequest"),
    "count_tokens": (
        functools.partial(messages_from_json, count_only=True),
        messages_body,
        "AnthropicCountTokensRequest",
    ),
    "chat": (chat_from_json, chat_body, "ChatCompletionRequest"),
    "completions": (completion_from_json, completion_body, "CompletionRequest"),
    "conversations": (_conversation, conversation_body, "CreateConversationRequest"),
}
EXAMPLES = int(os.environ.get("MLX_RESPONSES_DECODER_EXAMPLES", "300"))


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    components = build_document(web.Application(), API_PARTS)["components"]
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": components})


def _decodes(decode: Decode, body: Any) -> OpenAIError | None:
    """None if `decode` takes `body`; its 400 if it refuses; anything else fails the test."""
    try:
        decode(body)
    except OpenAIError as error:
        assert error.status == 400, error.message
        return error
    return None


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_the_valid_body_is_documented_and_decodes(name: str) -> None:
    decode, body, schema = DIALECTS[name]
    assert list(_validator(schema).iter_errors(body("m"))) == []
    assert _decodes(decode, body("m")) is None


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_mutated_bodies_are_400_and_the_document_agrees(name: str) -> None:
    decode, body, schema = DIALECTS[name]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        sent = data.draw(mutated(body("m"), big=False))
        raw = json.dumps(sent, allow_nan=True).encode("utf-8", "surrogatepass")
        try:
            parsed = parse_body(raw)  # what the route reads
        except OpenAIError as error:
            assert error.status == 400
            return
        refused = _decodes(decode, parsed)
        if refused is not None:
            valid = _validator(schema).is_valid(parsed)
            assert not valid, f"documented but refused ({refused.message}): {raw[:600]!r}"

    check()


MESSAGES = messages_body("m")
CHAT = chat_body("m")


@pytest.mark.parametrize(
    ("name", "override", "param"),
    [
        # The fuzzer's 500s: an object or array where a role name goes.
        ("messages", {"messages": [{"role": {}, "content": ""}]}, "messages[0].role"),
        ("count_tokens", {"messages": [{"role": [], "content": "x"}]}, "messages[0].role"),
        (
            "messages",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": 1}],
                    }
                ]
            },
            "messages[0].content[0].is_error",
        ),
        ("messages", {"tools": [{"type": 5, "name": "x"}]}, "tools[0].type"),
        ("messages", {"thinking": {"type": "enabled", "budget_tokens": None}}, None),
        ("messages", {"stream": None, "max_tokens": 4.0}, "ok"),
        (
            "chat",
            {"messages": [{"role": "assistant", "content": "a", "reasoning_content": 0}]},
            "messages[0].reasoning_content",
        ),
        ("chat", {"max_completion_tokens": 4, "max_tokens": "x"}, "max_tokens"),
        (
            "chat",
            {"tools": [{"type": "function", "function": 5, "name": "f"}]},
            "tools[0].function",
        ),
        ("chat", {"stream": None, "logprobs": None, "top_logprobs": None}, "ok"),
        ("completions", {"echo": None, "stream": None}, "ok"),
        ("responses", {"tool_choice": {"type": "function"}}, "tool_choice.name"),
        ("responses", {"top_logprobs": 2.0, "max_output_tokens": 8.0}, "ok"),
        ("responses", {"top_logprobs": 2.5}, "top_logprobs"),
        ("conversations", {"items": [{"type": "reasoning", "content": 0}]}, "items[0].content"),
        (
            "conversations",
            {"items": [{"role": "user", "content": "x", "status": 1}]},
            "items[0].status",
        ),
    ],
)
def test_refusals_name_the_field(name: str, override: dict[str, Any], param: str | None) -> None:
    """`param` "ok": taken (and documented); None: a 400 whatever its param."""
    decode, body, schema = DIALECTS[name]
    sent = {**body("m"), **override}
    refused = _decodes(decode, sent)
    if param == "ok":
        assert refused is None
        assert list(_validator(schema).iter_errors(sent)) == []
        return
    assert refused is not None, "accepted"
    if param is not None:
        assert refused.param == param
    assert not _validator(schema).is_valid(sent), "the document allows what the decoder refuses"
