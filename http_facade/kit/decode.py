"""Decoding primitives: a JSON value checked for its type and its proto field's range, or a 400
naming the parameter (OpenAI's `invalid_type` / `invalid_value` errors)."""

from __future__ import annotations

import re
from typing import Any

from mlx_responses.http_facade.kit.errors import invalid

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
NUMBER = (int, float)


def proto_names(enum: Any, *names: str) -> dict[str, Any]:
    """Wire names as the values of a proto enum (`user` is pb.Role's ROLE_USER), in order."""
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum.DESCRIPTOR.name).upper()
    return {name: enum.Value(f"{prefix}_{name.upper()}") for name in names}


def lookup(table: dict[str, Any], value: Any) -> Any:
    """`table[value]` for a string key, else None (a list or object is never a key)."""
    return table.get(value) if isinstance(value, str) else None


def one_of(names: set[str] | frozenset[str], value: Any) -> bool:
    """Whether `value` is a string among `names` (a list or object never is)."""
    return isinstance(value, str) and value in names


def type_name(value: Any) -> str:
    """The JSON type of a parsed value, as the error messages name it."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def expect(value: Any, kind: type | tuple[type, ...], param: str, what: str) -> Any:
    """`value` if it is a `kind` (a bool is no number), else a 400 saying it expected `what`."""
    is_bool = isinstance(value, bool)
    numeric = kind in (int, float, (int, float))
    if not isinstance(value, kind) or (numeric and is_bool):
        raise invalid(
            f"Invalid type for '{param}': expected {what}, but got {type_name(value)}.",
            param,
            "invalid_type",
        )
    return value


def required_str(obj: dict[str, Any], key: str, param: str) -> str:
    """`obj[key]`, a string that must be there (`param.key` names it)."""
    if obj.get(key) is None:
        raise invalid(f"Missing required parameter: '{param}.{key}'.", f"{param}.{key}")
    return expect(obj[key], str, f"{param}.{key}", "a string")


def integer(value: Any, param: str, limit: int = INT64_MAX) -> int:
    """An integer that fits its proto field (the core judges the meaningful range).

    JSON has one number type: `2.0` is the integer 2 (as JSON Schema's "integer" says), `2.5`
    and `1e400` are not integers.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    number: int = expect(value, int, param, "an integer")
    if not -limit - 1 <= number <= limit:
        raise invalid(f"Invalid '{param}': {number} is out of range.", param, "invalid_value")
    return number


def number(value: Any, param: str) -> float:
    """A number (an integer too) as a double; an integer beyond any double is out of range."""
    given = expect(value, NUMBER, param, "a number")
    try:
        return float(given)
    except OverflowError as exc:  # an integer beyond any double
        raise invalid(f"Invalid '{param}': out of range.", param, "invalid_value") from exc


def flag(obj: dict[str, Any], key: str, param: str | None = None) -> bool:
    """An optional boolean: null or absent is false."""
    value = obj.get(key)
    if value is None:
        return False
    return bool(expect(value, bool, param or key, "a boolean"))
