"""Schema bounding: unbounded values get bounds, a schema's own bounds win, nothing widens."""

from __future__ import annotations

from mlx_responses.service.text.json_bounds import JsonBounds, bound_schema

BOUNDS = JsonBounds(max_string_length=40, max_integer=999, max_items=5, max_properties=6)


def test_unbounded_values_get_bounds() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city", "n"],
    }
    out = bound_schema(schema, BOUNDS)
    props = out["properties"]
    assert props["city"]["maxLength"] == 40
    assert (props["n"]["minimum"], props["n"]["maximum"]) == (-999, 999)
    assert "multipleOf" not in props["n"]
    assert props["x"]["multipleOf"] == BOUNDS.number_multiple_of
    assert props["tags"]["maxItems"] == 5 and props["tags"]["items"]["maxLength"] == 40
    assert out["additionalProperties"] is False
    assert "maxLength" not in schema["properties"]["city"], "the request's schema is not touched"


def test_schema_bounds_win() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "maxLength": 3000},
            "e": {"type": "string", "enum": ["a", "b"]},
            "low": {"type": "integer", "minimum": 5000},
            "high": {"type": "integer", "maximum": -5000},
            "both": {"type": "integer", "minimum": 1, "maximum": 10**9},
            "a": {"type": "array", "minItems": 9},
            "m": {"type": "number", "multipleOf": 0.5},
        },
        "additionalProperties": True,
    }
    out = bound_schema(schema, BOUNDS)["properties"]
    assert out["s"]["maxLength"] == 3000 and "maxLength" not in out["e"]
    assert out["low"] == {"type": "integer", "minimum": 5000}, "no maximum below the minimum"
    assert out["high"] == {"type": "integer", "maximum": -5000}
    assert out["both"] == {"type": "integer", "minimum": 1, "maximum": 10**9}
    assert out["a"]["maxItems"] == 9, "never below minItems"
    assert out["m"]["multipleOf"] == 0.5
    assert bound_schema(schema, BOUNDS)["additionalProperties"] is True


def test_maps_and_composition() -> None:
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": ["integer", "null"]}}},
        ],
        "$defs": {"m": {"type": "object", "additionalProperties": {"type": "string"}}},
    }
    out = bound_schema(schema, BOUNDS)
    first, second = out["allOf"]
    assert "additionalProperties" not in first, "closing an allOf branch would refuse 'b'"
    assert first["properties"]["a"]["maxLength"] == 40
    assert second["properties"]["b"]["maximum"] == 999
    assert out["$defs"]["m"]["maxProperties"] == 6
    assert out["$defs"]["m"]["additionalProperties"]["maxLength"] == 40


def test_budget_scales_bounds() -> None:
    small, large = JsonBounds.for_budget(200), JsonBounds.for_budget(100_000)
    assert small.max_string_length == 50 and small.max_items == 12
    assert large.max_string_length == 512 and large.max_items == 64
