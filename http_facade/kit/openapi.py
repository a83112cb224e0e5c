"""Building blocks of the OpenAPI document, shared by every API's schema module."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = "application/json"
SSE = "text/event-stream"
Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
NUMBER: Schema = {"type": "number"}
BOOLEAN: Schema = {"type": "boolean"}
NULL: Schema = {"type": "null"}
OPT_STRING: Schema = {"type": ["string", "null"]}
OBJECT: Schema = {"type": "object"}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NON_EMPTY_STRING: Schema = {"type": "string", "minLength": 1}


def integer(minimum: int = INT64_MIN, maximum: int = INT64_MAX) -> Schema:
    """An integer the decoder takes: within its proto field's range (int64 unless narrower)."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def number(minimum: float | None = None, maximum: float | None = None) -> Schema:
    """A number, with the range the core enforces."""
    schema: Schema = {"type": "number"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def stop_sequences(limit: int) -> Schema:
    """`stop`: one string or up to `limit` strings, none of them empty (the core's check)."""
    one = NON_EMPTY_STRING
    return {"anyOf": [one, {"type": "array", "items": one, "maxItems": limit}]}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """The decoder treats null as absent."""
    return {"anyOf": [schema, {"type": "null"}]}


def sse_event(payload: str, done: bool = False) -> Schema:
    """One server-sent event: its `data` is JSON of the component `payload` (as OpenAPI 3.2
    reads an event stream: each event an object, the payload under contentSchema); `done`: a
    `data: [DONE]` event ends the stream."""
    data: Schema = {
        "type": "string",
        "contentMediaType": JSON,
        "contentSchema": ref(payload),
    }
    if done:
        data = {"anyOf": [data, {"const": "[DONE]"}]}
    return {
        "type": "object",
        "required": ["data"],
        "properties": {"data": data, "event": {"type": "string"}},
    }


def obj(required: tuple[str, ...] = (), **properties: Schema) -> Schema:
    return {"type": "object", "properties": properties, "required": list(required)}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


@dataclass(frozen=True)
class Operation:
    """What a handler takes and answers (its path and method come from the router)."""

    request: str | None = None
    ok: str | None = None
    streams: bool = False
    ok_type: str = JSON
    extra: dict[str, str] = field(default_factory=dict)  # other statuses -> schema
    stream_event: str = "ResponseStreamEvent"  # the SSE payload schema, when it streams
    error: str = "Error"  # the error envelope schema
    body_required: bool = True  # False: an empty body is taken as `{}`
    upgrade: bool = False  # a WebSocket handshake (101), not a JSON answer
    stream_done: bool = False  # the stream ends with `data: [DONE]`
