"""Object shapes, declared once: each property's JSON type, presence, the proto field it fills
and its doc line. A shape's decoder (`Shape.read`) and its OpenAPI schema (`Shape.schema`) are
both read from the declaration, for the structured parts of a request (items, content parts,
tools, formats) as `fields.py` does for a request's top-level scalars."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.kit.decode import expect, integer
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.openapi import BOOLEAN, OBJECT, STRING, Schema, nullable, obj
from mlx_responses.http_facade.kit.openapi import integer as integer_schema

# A property's presence: OPTIONAL takes null as absent; REQUIRED refuses an absent or null one
# ("Missing required parameter"); TYPED has no null: absent is its default (or, without one, a
# null that its type check refuses).
OPTIONAL, REQUIRED, TYPED = "optional", "required", "typed"
NO_DEFAULT = object()


@dataclass(frozen=True, slots=True)
class Kind:
    """What a property holds: its schema, and its check (the value, its param) -> proto value."""

    schema: Schema
    check: Callable[[Any, str], Any] | None  # None: the shape's decoder reads it by hand


def typed(kind: type | tuple[type, ...], what: str, schema: Schema) -> Kind:
    """A JSON type checked as it is (`what` names it in the refusal)."""
    return Kind(schema, lambda value, param: expect(value, kind, param, what))


TEXT = typed(str, "a string", STRING)
FLAG = typed(bool, "a boolean", BOOLEAN)
INT = Kind(integer_schema(), integer)  # an int64
# A JSON object carried as JSON text (a proto `string`: see STYLE.md, Protos).
JSON_TEXT = Kind(OBJECT, lambda value, param: json.dumps(expect(value, dict, param, "an object")))
# A call's arguments: JSON text, or an object (taken as its JSON text).
ARGUMENTS = Kind(
    {"anyOf": [STRING, OBJECT]},
    lambda value, param: value if isinstance(value, str) else JSON_TEXT.check(value, param),
)


def enum(table: dict[str, Any], expected: str | None = None, strings: bool = False) -> Kind:
    """One of `table`'s names, as its value; `expected` words the refusal (default: one of the
    names), `strings`: anything not a string is refused as a type first."""
    wording = expected or f"one of {', '.join(table)}"

    def check(value: Any, param: str) -> Any:
        if strings:
            expect(value, str, param, "a string")
        if isinstance(value, str) and value in table:
            return table[value]
        key = param.rsplit(".", 1)[-1]
        raise invalid(f"Invalid '{key}' {value!r}: expected {wording}.", param, "invalid_value")

    return Kind({"enum": sorted(table)}, check)


@dataclass(frozen=True, slots=True)
class Prop:
    """One property of a shape (its name is the shape's keyword)."""

    kind: Kind
    presence: str = OPTIONAL
    # The proto field it fills ("": its own name; None: checked only; "*": a union's, by type).
    to: str | None = ""
    default: Any = NO_DEFAULT  # TYPED: the value an absent property takes

    def schema(self) -> Schema:
        if self.presence == OPTIONAL:
            return _or_null(self.kind.schema)
        return self.kind.schema


def _or_null(schema: Schema) -> Schema:
    kind = schema.get("type")
    if isinstance(kind, str) and len(schema) == 1:
        return {"type": [kind, "null"]}
    return nullable(schema)


class Shape:
    """An object of `props` (its `type` the constant `kind`, where it has one), decoded into a
    `message` (a proto class)."""

    def __init__(
        self, kind: str | None, message: Any, type_required: bool = True, **props: Prop
    ) -> None:
        self.kind = kind
        self.message = message
        self.type_required = type_required
        self.props = props
        self._read = [
            (name, p.kind.check, p.presence, p.to if p.to != "" else name, p.default)
            for name, p in props.items()
            if p.kind.check is not None
        ]

    def build(self, value: dict[str, Any], param: str) -> Any:
        """`value` (an object) as the shape's proto message."""
        return self.message(**self.read(value, param))

    def read(self, value: dict[str, Any], param: str) -> dict[str, Any]:
        """The proto fields `value` (an object) fills, each checked in declared order."""
        fields: dict[str, Any] = {}
        for name, check, presence, to, default in self._read:
            given = value.get(name) if default is NO_DEFAULT else value.get(name, default)
            if given is None and presence != TYPED:
                if presence == REQUIRED:
                    where = f"{param}.{name}"
                    raise invalid(f"Missing required parameter: '{where}'.", where)
                continue
            checked = check(given, f"{param}.{name}")
            if to == "*":  # a union: the oneof field its type names
                fields.update(checked)
            elif to is not None:
                fields[to] = checked
        return fields

    def schema(self, **extra: Schema) -> Schema:
        """The shape's OpenAPI schema (`extra`: more properties, or ones replaced)."""
        props = self.props.items()
        needed = [n for n, p in props if p.presence == REQUIRED]
        needed += [n for n, p in props if p.presence == TYPED and p.default is NO_DEFAULT]
        properties = {n: p.schema() for n, p in props}
        if self.kind is not None:
            properties = {"type": {"const": self.kind}, **properties}
            needed = ["type", *needed] if self.type_required else needed
        return obj(tuple(needed), **{**properties, **extra})

    def nested(self, **extra: Schema) -> Kind:
        """The shape as a property's kind: an object, decoded into its message."""
        return Kind(
            self.schema(**extra),
            lambda value, param: self.build(expect(value, dict, param, "an object"), param),
        )

    def flat(self) -> Kind:
        """The shape as a property's kind whose fields fill its parent's message (to="*")."""
        return Kind(
            self.schema(),
            lambda value, param: self.read(expect(value, dict, param, "an object"), param),
        )


def union(*shapes: Shape, unknown: str, message: Any = dict) -> Kind:
    """An object that is one of `shapes`, told by its `type`, decoded as `message` whose oneof
    field its type names (by default {its type: message}, for a parent's to="*"); `unknown`
    words the refusal of another type ({})."""
    table = {s.kind: s for s in shapes}

    def check(value: Any, param: str) -> Any:
        expect(value, dict, param, "an object")
        kind = value.get("type")
        shape = table.get(kind) if isinstance(kind, str) else None
        if shape is None:
            raise invalid(unknown.format(repr(kind)), f"{param}.type", "invalid_value")
        return message(**{kind: shape.build(value, param)})

    return Kind({"anyOf": [s.schema() for s in shapes]}, check)


def array(kind: Kind, schema: Schema | None = None) -> Kind:
    """An array of `kind` (`schema`: a narrower one to publish)."""

    def check(value: Any, param: str) -> list[Any]:
        items = expect(value, list, param, "an array")
        return [kind.check(v, f"{param}[{i}]") for i, v in enumerate(items)]  # type: ignore[misc]

    return Kind(schema or {"type": "array", "items": kind.schema}, check)


def mapping(kind: Kind, schema: Schema | None = None) -> Kind:
    """An object of `kind` values by name (`schema`: a narrower one to publish)."""

    def check(value: Any, param: str) -> dict[str, Any]:
        entries = expect(value, dict, param, "an object")
        return {k: kind.check(v, f"{param}.{k}") for k, v in entries.items()}  # type: ignore[misc]

    return Kind(schema or {"type": "object", "additionalProperties": kind.schema}, check)


def opt(kind: Kind, to: str | None = "") -> Prop:
    """An optional property: null is absent."""
    return Prop(kind, OPTIONAL, to)


def req(kind: Kind, to: str | None = "") -> Prop:
    """A required property: absent or null is a missing parameter."""
    return Prop(kind, REQUIRED, to)


def must(kind: Kind, default: Any = NO_DEFAULT, to: str | None = "") -> Prop:
    """A property without null: absent takes `default`; with none, its type check refuses it."""
    return Prop(kind, TYPED, to, default)
