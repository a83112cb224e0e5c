"""Object shapes, declared once: each property's JSON type, presence and the proto field it
fills. A shape's decoder (`Shape.fill`) and its OpenAPI schema (`Shape.schema`) are both read
from the declaration, for the structured parts of a request (items, tools, formats) as
`fields.py` does for a request's top-level fields; a shape's properties are one text (`Shape`).
A shape fills its proto message in place (nested shapes their sub-messages): no message is
built to be copied."""

from __future__ import annotations

import json
import re
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
    """What a property holds: its schema, and either its check ((value, param) -> the proto
    value) or its fill ((the proto message, value, param): a nested shape's)."""

    schema: Schema
    check: Callable[[Any, str], Any] | None = None  # neither: the decoder reads it by hand
    plain: type | None = None  # a value of exactly this type is taken as it is (no call)
    fill: Callable[[Any, Any, str], None] | None = None
    container: str = ""  # "list", "map" or "message": the check's value goes into the field


def typed(kind: type, what: str, schema: Schema) -> Kind:
    """A JSON type checked as it is (`what` names it in the refusal)."""
    return Kind(schema, lambda value, param: expect(value, kind, param, what), kind)


TEXT = typed(str, "a string", STRING)
FLAG = typed(bool, "a boolean", BOOLEAN)
INT = Kind(integer_schema(), integer)  # an int64
# A JSON object carried as JSON text (a proto `string`: see STYLE.md, Protos).
JSON_TEXT = Kind(OBJECT, lambda value, param: json.dumps(expect(value, dict, param, "an object")))
# A call's arguments: JSON text, or an object (taken as its JSON text).
ARGUMENTS = Kind(
    {"anyOf": [STRING, OBJECT]},
    lambda value, param: (
        json.dumps(value) if isinstance(value, dict) else expect(value, str, param, "a string")
    ),
    str,
)
# The kinds a shape names without passing them.
KINDS = {"text": TEXT, "flag": FLAG, "int": INT, "json": JSON_TEXT, "arguments": ARGUMENTS}


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


# The type check of an array or an object (its wording): kit/decode.expect's by default.
Expect = Callable[[Any, Any, str, str], Any]


def array(
    kind: Kind, schema: Schema | None = None, what: str = "an array", typed: Expect = expect
) -> Kind:
    """An array of `kind` (`schema`: a narrower one to publish; `what` and `typed` word the
    refusal of another type)."""
    check, fill = kind.check, kind.fill

    def checked(value: Any, param: str) -> list[Any]:
        items = typed(value, list, param, what)
        if fill is None:
            return [check(v, f"{param}[{i}]") for i, v in enumerate(items)]  # type: ignore[misc]
        return items

    def filled(target: Any, value: Any, param: str) -> None:
        for i, item in enumerate(checked(value, param)):
            fill(target.add(), item, f"{param}[{i}]")  # type: ignore[misc]

    schema = schema or {"type": "array", "items": kind.schema}
    if fill is None:
        return Kind(schema, checked, container="list")
    return Kind(schema, fill=filled)


def mapping(kind: Kind, schema: Schema | None = None, typed: Expect = expect) -> Kind:
    """An object of `kind` values by name (`schema`: a narrower one to publish)."""

    def check(value: Any, param: str) -> dict[str, Any]:
        entries = typed(value, dict, param, "an object")
        return {k: kind.check(v, f"{param}.{k}") for k, v in entries.items()}  # type: ignore[misc]

    schema = schema or {"type": "object", "additionalProperties": kind.schema}
    return Kind(schema, check, container="map")


@dataclass(frozen=True, slots=True)
class Prop:
    """One property of a shape (its name is the shape's keyword)."""

    kind: Kind
    presence: str = OPTIONAL
    # The proto field it fills ("": its own name; None: checked only; "*": its parent's message,
    # a flat shape's fields or a union's oneof).
    to: str | None = ""
    default: Any = NO_DEFAULT  # TYPED: the value an absent property takes

    def schema(self) -> Schema:
        if self.presence == OPTIONAL:
            return _or_null(self.kind.schema)
        return self.kind.schema


def _or_null(schema: Schema) -> Schema:
    """`schema` or null (a type list, an enum with null, or else anyOf)."""
    if isinstance(schema.get("type"), str):
        return {**schema, "type": [schema["type"], "null"]}
    if list(schema) == ["enum"]:
        return {"enum": [*schema["enum"], None]}
    return nullable(schema)


def put(target: Any, to: str, value: Any, container: str) -> None:
    """`value` into `target`'s field `to`: set, or (a list, a map) added to it."""
    if not container:
        setattr(target, to, value)
    elif container == "list":
        getattr(target, to).extend(value)
    elif container == "message":
        getattr(target, to).CopyFrom(value)
    else:
        entries = getattr(target, to)
        for key, entry in value.items():
            entries[key] = entry


# A property declared as `name[?|!]: KIND [= DEFAULT] [-> to]` (see `Shape`).
_PROP = re.compile(r"(\w+)([?!]?):\s*(\w+)(?:\s*=\s*('[^']*'|\w+))?(?:\s*->\s*([\w*]+))?")
PRESENCE = {"?": OPTIONAL, "!": TYPED, "": REQUIRED}


def props(text: str, names: dict[str, Any]) -> dict[str, Prop]:
    """The properties `text` declares, their kinds and defaults named in `names` or KINDS."""
    out = {}
    for declared in filter(None, (part.strip() for part in text.split(","))):
        match = _PROP.fullmatch(declared)
        if match is None:
            raise ValueError(f"not a property: {declared!r}")
        name, mark, kind, default, to = match.groups()
        value = NO_DEFAULT if default is None else {"''": "", "null": None}.get(default)
        if default is not None and default not in ("''", "null"):
            value = names[default]
        where = "" if to is None else None if to == "_" else to
        out[name] = Prop(names.get(kind) or KINDS[kind], PRESENCE[mark], where, value)
    return out


class Shape:
    """An object of properties (its `type` the constant `kind`, where it has one), decoded into
    a `message` (a proto class, or a factory of one). `text` declares them, comma-separated:
    `name: K` required, `name?: K` optional (null is absent), `name!: K` without null (absent:
    `= D`, its default, or else refused by K's check); `-> to` the proto field it fills (its own
    name unless given; `*` the message itself, `_` none: checked only); K and D are `names`' or
    KINDS' (text, flag, int, json, arguments)."""

    def __init__(self, kind: str | None, message: Any, text: str = "", /, **names: Any) -> None:
        self.kind = kind
        self.message = message
        self.props = props(text, names)
        self._steps = [
            (
                name,
                to,
                p.kind.plain if to not in (None, "*") else None,
                p.presence,
                p.default,
                p.kind,
            )
            for name, p in self.props.items()
            if p.kind.check is not None or p.kind.fill is not None
            for to in [name if p.to == "" else p.to]
        ]

    def build_in(self, outer: Any, field: str, value: dict[str, Any], param: str) -> Any:
        """A new `outer` message whose `field` (a message of this shape) `value` fills."""
        message = outer()
        inner = getattr(message, field)
        self.fill(inner, value, param)
        inner.SetInParent()
        return message

    def fill(self, target: Any, value: dict[str, Any], param: str) -> None:
        """Sets `target`'s fields from `value` (an object), each checked in declared order."""
        for name, to, plain, presence, default, kind in self._steps:
            given = value.get(name) if default is NO_DEFAULT else value.get(name, default)
            if type(given) is plain:
                setattr(target, to, given)  # type: ignore[arg-type]  # a plain kind's value
                continue
            if given is None and presence != TYPED:
                if presence == REQUIRED:
                    where = f"{param}.{name}"
                    raise invalid(f"Missing required parameter: '{where}'.", where)
                continue
            where = f"{param}.{name}"
            if kind.fill is not None:
                kind.fill(target if to == "*" else getattr(target, to or ""), given, where)
                continue
            checked = kind.check(given, where)  # type: ignore[misc]
            if to is not None:
                put(target, to, checked, kind.container)

    def schema(self, **extra: Schema) -> Schema:
        """The shape's OpenAPI schema (`extra`: more properties, or ones replaced)."""
        props = self.props.items()
        needed = [n for n, p in props if p.presence == REQUIRED]
        needed += [n for n, p in props if p.presence == TYPED and p.default is NO_DEFAULT]
        properties = {n: p.schema() for n, p in props}
        if self.kind is not None:
            properties = {"type": {"const": self.kind}, **properties}
            needed = ["type", *needed]
        return obj(tuple(needed), **{**properties, **extra})

    def nested(self, typed: Expect = expect, **extra: Schema) -> Kind:
        """The shape as a property's kind: an object filling the property's sub-message (or,
        with to="*", the parent's own message: a flat shape)."""

        def fill(target: Any, value: Any, param: str) -> None:
            self.fill(target, typed(value, dict, param, "an object"), param)
            target.SetInParent()

        return Kind(self.schema(**extra), fill=fill)


def field_shapes(parent: Any, declared: dict[str, str], **names: Any) -> dict[str, Shape]:
    """One shape per field of `parent` (a proto class) that `declared` names: its kind the
    field's name, its message the field's type, its properties the declared text."""
    return {
        name: Shape(name, type(getattr(parent(), name)), text, **names)
        for name, text in declared.items()
    }


def union(*shapes: Shape, unknown: str) -> Kind:
    """An object that is one of `shapes`, told by its `type`: it fills the sub-message of the
    oneof field its type names; `unknown` words the refusal of another type ({})."""
    table = {s.kind: s for s in shapes}

    def fill(target: Any, value: Any, param: str) -> None:
        expect(value, dict, param, "an object")
        kind = value.get("type")
        shape = table.get(kind) if isinstance(kind, str) else None
        if shape is None:
            raise invalid(unknown.format(repr(kind)), f"{param}.type", "invalid_value")
        chosen = getattr(target, kind)
        shape.fill(chosen, value, param)
        chosen.SetInParent()

    return Kind({"anyOf": [s.schema() for s in shapes]}, fill=fill)
