"""Every grammar compile is guarded: a schema the compiler panics on is a 400 naming the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.stack import Stack

WIDE = "é" * 80  # 160 bytes: llguidance slices error text at byte 100, inside a character

HOSTILE_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"type": "string", "minLength": WIDE}}},
    {"type": "object", "properties": {"a": {"type": "array", "minItems": WIDE}}},
    {"type": "object", "properties": {"a": {"type": "integer", "maximum": WIDE}}},
    {"type": "object", "properties": {"a": {"enum": [WIDE], "description": WIDE}}},
]


def _post(stack: Stack, body: dict[str, Any]) -> httpx.Response:
    body = {"model": stack.settings.models[0].name, "input": "hi", "max_output_tokens": 4, **body}
    return httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=30)


@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS, ids=["minLength", "minItems", "max", "enum"])
def test_text_format_schema_is_400_or_answered(stack: Stack, schema: dict[str, Any]) -> None:
    reply = _post(
        stack,
        {"text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}},
    )
    assert reply.status_code in (200, 400), reply.text
    if reply.status_code == 400:
        assert reply.json()["error"]["param"] == "text.format.schema"


@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS, ids=["minLength", "minItems", "max", "enum"])
def test_tool_parameters_are_400_or_answered(stack: Stack, schema: dict[str, Any]) -> None:
    tool = {"type": "function", "name": "f", "parameters": schema}
    reply = _post(stack, {"tools": [tool], "tool_choice": "required"})
    assert reply.status_code in (200, 400), reply.text
    if reply.status_code == 400:
        assert reply.json()["error"]["param"].startswith("tools")


def test_the_panicking_schema_is_a_400(stack: Stack) -> None:
    reply = _post(
        stack,
        {"text": {"format": {"type": "json_schema", "name": "x", "schema": HOSTILE_SCHEMAS[0]}}},
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == "text.format.schema"
