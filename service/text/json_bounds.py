"""Bounds a JSON Schema's unbounded parts so constrained decoding can always finish.

A grammar that allows any number of digits or characters lets a small model wander inside a
value until the token limit. Every bound added here only narrows what the schema accepts (the
output still validates against the schema as sent), and a bound the schema states itself wins.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

# Keywords whose value is one subschema / a list of subschemas / a map of subschemas.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# A string with one of these is already bounded (or its shape is the schema's own business).
_STRING_SHAPED = ("maxLength", "enum", "const", "pattern", "format")


@dataclass(frozen=True)
class JsonBounds:
    """The bounds the grammar adds where a schema states none."""

    max_string_length: int = 512
    max_integer: int = 10**15 - 1  # 15 digits: exact in every JSON implementation
    number_multiple_of: float = 1e-6  # at most 6 fraction digits, no exponent
    max_items: int = 64
    max_properties: int = 32

    @classmethod
    def for_budget(cls, max_tokens: int) -> JsonBounds:
        """Bounds that let one value use at most about a quarter of the output budget."""
        quarter = max(16, max_tokens // 4)
        return cls(
            max_string_length=min(512, quarter),
            max_items=min(64, max(4, max_tokens // 16)),
            max_properties=min(32, max(4, max_tokens // 16)),
        )


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _bound_numbers(schema: dict[str, Any], types: set[str], bounds: JsonBounds) -> None:
    if not types & {"integer", "number"}:
        return
    # NOTE: a schema's own bound wins; only a missing side is filled, and never past it.
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is None and (high is None or high >= -bounds.max_integer):
        schema["minimum"] = -bounds.max_integer
    if high is None and (low is None or low <= bounds.max_integer):
        schema["maximum"] = bounds.max_integer
    if "number" in types and "integer" not in types and "multipleOf" not in schema:
        schema["multipleOf"] = bounds.number_multiple_of


def _bound_object(
    schema: dict[str, Any], types: set[str], bounds: JsonBounds, *, free: bool
) -> None:
    if "object" not in types:
        return
    composed = any(k in schema for k in ("allOf", "anyOf", "oneOf", "$ref"))
    if "properties" in schema:
        # Keys the schema does not name are what a small model invents forever.
        named_only = not composed and not {"additionalProperties", "patternProperties"} & set(
            schema
        )
        if free and named_only:
            schema["additionalProperties"] = False
    elif "maxProperties" not in schema and "patternProperties" not in schema:
        # A map: llguidance bounds the key count only when no named property exists.
        schema["maxProperties"] = bounds.max_properties


def _walk(schema: Any, bounds: JsonBounds, *, free: bool = True) -> None:
    if not isinstance(schema, dict):
        return
    types = _types(schema)
    if "string" in types and not any(k in schema for k in _STRING_SHAPED):
        schema["maxLength"] = bounds.max_string_length
    _bound_numbers(schema, types, bounds)
    if "array" in types and "maxItems" not in schema:
        schema["maxItems"] = max(bounds.max_items, int(schema.get("minItems", 0)))
    _bound_object(schema, types, bounds, free=free)
    for key in _ONE:
        _walk(schema.get(key), bounds)
    for key in _LIST:
        value = schema.get(key)
        if isinstance(value, list):
            for sub in value:
                # An allOf branch that closed its object would refuse its siblings' keys.
                _walk(sub, bounds, free=key != "allOf")
    for key in _MAP:
        value = schema.get(key)
        if isinstance(value, dict):
            for sub in value.values():
                _walk(sub, bounds)


def bound_schema(schema: dict[str, Any], bounds: JsonBounds) -> dict[str, Any]:
    """A copy of `schema` with the unbounded parts bounded."""
    bounded = copy.deepcopy(schema)
    _walk(bounded, bounds)
    return bounded
