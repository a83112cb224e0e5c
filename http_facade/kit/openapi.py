"""Building blocks of the OpenAPI document, shared by every API's schema module."""

from __future__ import annotations

import re
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


# A schema in a TypeScript-like notation (`ts`): names, 'literals', $Refs and punctuation.
_TOKENS = re.compile(r"\s*(?:(\$?\w+)|'([^']*)'|(\S))")
_TYPES = ("string", "integer", "number", "boolean", "object", "null", "array")


def ts(text: str, **names: Schema) -> Schema:
    """The JSON schema `text` writes as a TypeScript type: `string`, `integer`, ... (a type),
    `'x'` (a constant), `$Name` (a component), `T[]` (an array), `{a: T, b?: T}` (an object, b
    not required), `{[key]: T}` (a map), `A | B` (literals make an enum, types a type list,
    anything else anyOf), `?T` (T or null, as anyOf); other names are taken from `names`."""
    tokens = [(m[1], m[2], m[3]) for m in _TOKENS.finditer(text)]
    at = 0

    def punct(char: str, needed: bool = False) -> bool:
        nonlocal at
        if at < len(tokens) and tokens[at][2] == char:
            at += 1
            return True
        if needed:
            raise ValueError(f"{text!r}: expected {char!r} at token {at}")
        return False

    def word() -> tuple[str | None, str | None]:
        nonlocal at
        if at == len(tokens) or tokens[at][2] is not None:
            raise ValueError(f"{text!r}: expected a name or a literal at token {at}")
        at += 1
        return tokens[at - 1][:2]

    def union() -> Schema:
        members = [postfix()]
        while punct("|"):
            members.append(postfix())
        if len(members) == 1:
            return members[0]
        if all(m == NULL or list(m) == ["const"] for m in members):
            return {"enum": [m.get("const") for m in members]}
        if all(list(m) == ["type"] and isinstance(m["type"], str) for m in members):
            return {"type": [m["type"] for m in members]}
        return {"anyOf": members}

    def postfix() -> Schema:
        if punct("?"):
            return nullable(postfix())
        schema = atom()
        while punct("["):
            punct("]", needed=True)
            schema = array(schema)
        return schema

    def atom() -> Schema:
        if punct("("):
            schema = union()
            punct(")", needed=True)
            return schema
        if punct("{"):
            return members()
        name, literal = word()
        if literal is not None or name in ("true", "false"):
            return {"const": literal if literal is not None else name == "true"}
        if name is not None and name.startswith("$"):
            return ref(name[1:])
        return {"type": name} if name in _TYPES else names[str(name)]

    def members() -> Schema:
        if punct("["):
            word()
            punct("]", needed=True)
            punct(":", needed=True)
            schema = {"type": "object", "additionalProperties": union()}
            punct("}", needed=True)
            return schema
        properties, needed = {}, []
        while not punct("}"):
            name = str(word()[0])
            if not punct("?"):
                needed.append(name)
            punct(":", needed=True)
            properties[name] = union()
            punct(",")
        return {"type": "object", "properties": properties, "required": needed}

    schema = union()
    if at != len(tokens):
        raise ValueError(f"{text!r}: left over from token {at}")
    return schema


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
