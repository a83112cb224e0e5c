"""A dialect's request fields, each declared once: its JSON type, bounds, the core field it
fills and its doc line. The decoder's checks and the field's OpenAPI schema are both read from
the declaration (as vLLM's per-API `protocol.py` models are); structured fields (items, tools,
content parts) carry the schema of what their hand-written decoder takes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.kit.decode import INT64_MAX, NUMBER, expect, integer, number
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.openapi import Schema, nullable

TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": NUMBER,
    "object": dict,
    "array": list,
}
ARTICLE = {"integer": "an", "object": "an", "array": "an"}


@dataclass(frozen=True)
class Field:
    """One top-level field of a request body; null is taken as absent."""

    name: str
    type: str  # its JSON type (TYPES); "enum" for one of `enum`
    doc: str = ""
    to: str | None = None  # the CreateResponseParams field it fills (None: the dialect reads it)
    minimum: float | None = None
    maximum: float | None = None
    checked: bool = True  # False: the bounds are the core's to enforce, documented here only
    limit: int = INT64_MAX  # an integer's proto field range (int64 unless narrower)
    enum: tuple[str, ...] = ()
    required: bool = False
    schema: Schema | None = None  # a structured field: what its hand-written decoder takes

    def json_schema(self) -> Schema:
        """The field's OpenAPI schema: what `read` takes (and what the core checks after)."""
        if self.schema is not None:
            schema = dict(self.schema)
        elif self.type == "null":
            schema = {"type": "null"}
        elif self.type == "enum":
            schema = {"enum": list(self.enum)}
        elif self.type in ("integer", "number"):
            schema = {"type": self.type}
            low, high = self.minimum, self.maximum
            if self.type == "integer":
                low = -self.limit - 1 if low is None else low
                high = self.limit if high is None else high
            schema.update({k: v for k, v in (("minimum", low), ("maximum", high)) if v is not None})
        elif self.required and self.type == "string":
            schema = {"type": "string", "minLength": 1}
        else:
            schema = {"type": self.type}
        if not (self.required or self.type == "null" or _admits_null(schema)):
            schema = nullable(schema)
        return {**schema, "description": self.doc} if self.doc else schema

    def read(self, body: dict[str, Any]) -> Any:
        """The body's value, checked for type, proto range and bounds; None when absent."""
        value = body.get(self.name)
        if value is None:
            return None
        name = self.name
        if self.type == "integer":
            value = integer(value, name, self.limit)
        elif self.type == "number":
            value = number(value, name)
        elif self.type == "enum":
            if not isinstance(value, str) or value not in self.enum:
                expected = " or ".join(repr(v) for v in self.enum)
                raise invalid(
                    f"Invalid '{name}': {value!r}; expected {expected}.", name, "invalid_value"
                )
        elif self.type == "null":
            raise invalid(f"'{name}' is not supported.", name, "unsupported_value")
        elif self.schema is None:
            article = ARTICLE.get(self.type, "a")
            value = expect(value, TYPES[self.type], name, f"{article} {self.type}")
        if self.checked and self._outside(value):
            raise invalid(f"Invalid '{name}': {value}; {self._bounds()}.", name, "invalid_value")
        return value

    def _outside(self, value: Any) -> bool:
        return (self.minimum is not None and value < self.minimum) or (
            self.maximum is not None and value > self.maximum
        )

    def _bounds(self) -> str:
        if self.maximum is None:
            return f"must be at least {self.minimum}"
        return f"must be between {self.minimum} and {self.maximum}"


def _admits_null(schema: Schema) -> bool:
    return {"type": "null"} in schema.get("anyOf", ())


def required(fields: Iterable[Field], body: Any, missing: str) -> dict[str, Any]:
    """`body` as a JSON object holding every required field (`missing` formats a refusal)."""
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    for field in fields:
        if field.required and body.get(field.name) is None:
            name = field.name
            raise invalid(missing.format(name), name, "missing_required_parameter")
    return body


def read(fields: Iterable[Field], body: dict[str, Any]) -> dict[str, Any]:
    """Each plain field's checked value (None: absent); the structured ones are left to the
    dialect's hand-written decoders."""
    return {f.name: f.read(body) for f in fields if f.schema is None}


def fill(fields: Iterable[Field], values: dict[str, Any], params: Any) -> None:
    """Sets `params`' core field of each field that fills one and has a value."""
    for field in fields:
        if field.to is not None and values.get(field.name) is not None:
            setattr(params, field.to, values[field.name])


def request_schema(fields: Iterable[Field], description: str, **extra: Any) -> Schema:
    """The OpenAPI object schema of a request body of `fields`."""
    fields = list(fields)
    return {
        "type": "object",
        "required": [f.name for f in fields if f.required],
        "description": description,
        "properties": {f.name: f.json_schema() for f in fields},
        **extra,
    }
