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


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """The decoder treats null as absent."""
    return {"anyOf": [schema, {"type": "null"}]}


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
