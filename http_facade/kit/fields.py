"""A dialect's request fields, each declared once, on one line (`row`): its JSON type, bounds,
the core field it fills and its doc line. The decoder's checks and the field's OpenAPI schema
are both read from the declaration (as vLLM's per-API `protocol.py` models are); structured
fields (items, tools, content parts) carry the schema of what their hand-written decoder takes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mlx_responses.http_facade.kit.decode import (
    INT32_MAX,
    INT64_MAX,
    NUMBER,
    expect,
    integer,
    number,
)
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.openapi import Schema, nullable
from mlx_responses.http_facade.kit.shapes import Kind, put

TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "integer": int,
    "number": NUMBER,
    "object": dict,
    "array": list,
}
ARTICLE = {"integer": "an", "object": "an", "array": "an"}


@dataclass(frozen=True, slots=True)
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
    # What it takes, where its type does not say it all: a structured field's (its type names
    # the hand-written decoder that reads it), or a plain field's narrower than its checks.
    schema: Schema | None = None
    kind: Kind | None = None  # a structured field's declared shape (kit/shapes.py)

    @property
    def plain(self) -> bool:
        """Whether `read` checks it (a JSON type, an enum, null, or a declared shape)."""
        return self.kind is not None or self.type in TYPES or self.type in ("enum", "null")

    def checker(self) -> Callable[[Any], Any]:
        """What `read` calls with the field's value (not null); a declared shape's value is
        checked where the decoder puts it in its message (`fill_shaped`)."""
        return self.check if self.kind is None else _as_given

    def json_schema(self) -> Schema:
        """The field's OpenAPI schema: what `read` takes (and what the core checks after)."""
        if self.schema is not None:
            schema = dict(self.schema)
        elif self.kind is not None:
            schema = dict(self.kind.schema)
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
        return None if value is None else self.check(value)

    def check(self, value: Any) -> Any:
        """`value` (not null) checked for type, proto range and bounds."""
        kind, name = self.type, self.name
        if kind in ("string", "boolean"):
            if type(value) is not (str if kind == "string" else bool):
                expect(value, TYPES[kind], name, f"a {kind}")
            return value
        if kind == "integer":
            value = integer(value, name, self.limit)
        elif kind == "number":
            value = number(value, name)
        elif kind == "enum":
            if not isinstance(value, str) or value not in self.enum:
                expected = " or ".join(repr(v) for v in self.enum)
                raise invalid(
                    f"Invalid '{name}': {value!r}; expected {expected}.", name, "invalid_value"
                )
        elif kind == "null":
            raise invalid(f"'{name}' is not supported.", name, "unsupported_value")
        else:
            value = expect(value, TYPES[kind], name, f"{ARTICLE.get(kind, 'a')} {kind}")
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


def row(text: str, **names: Any) -> Field:
    """A field declared on one line: `name[!]: type [lo..hi] [core] [int32] [->[to]] [= S] [~ K]
    | doc`: ! required, lo..hi its bounds (`core`: the core's to enforce), int32 its proto field's
    range, -> the core field it fills (its own name unless given), = its schema and ~ its
    declared shape (`names`' S and K)."""
    head, _, doc = text.partition(" | ")
    name, kind, *words = head.split()
    options: dict[str, Any] = {"required": name.endswith("!:")}
    for word, after in zip(words, [*words[1:], ""], strict=False):
        if ".." in word:
            low, high = (_number(bound) for bound in word.split(".."))
            options.update(minimum=low, maximum=high)
        elif word == "core":
            options["checked"] = False
        elif word == "int32":
            options["limit"] = INT32_MAX
        elif word.startswith("->"):
            options["to"] = word[2:] or name.rstrip("!:")
        elif word in ("=", "~"):
            options["schema" if word == "=" else "kind"] = names[after]
    return Field(name.rstrip("!:"), kind, doc, **options)


def _number(text: str) -> int | float | None:
    return None if not text else int(text) if text.lstrip("-").isdigit() else float(text)


class Fields(tuple[Field, ...]):
    """A request's fields, in order, indexed by name: Field objects or `row`s (of `names`)."""

    def __new__(cls, *fields: Field | str, **names: Any) -> Fields:
        rows = (f if isinstance(f, Field) else row(f, **names) for f in fields)
        return super().__new__(cls, rows)

    def __init__(self, *_: Field | str, **__: Any) -> None:
        fields = tuple(self)
        self.checks = {f.name: f.checker() for f in fields if f.plain}
        filled = [f for f in fields if f.plain and f.to is not None]
        self.targets = {f.name: f.to for f in filled if f.kind is None}
        # Declared shapes: a message filled in place, a list or a map added to, a value set.
        self.shaped = {f.name: (f.to or "", f.kind) for f in filled if f.kind is not None}
        self.required = tuple(f.name for f in fields if f.required)

    def decode(
        self, body: Any, params: Any, missing: str = "Missing required parameter: '{}'."
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """`body` (a JSON object holding every required field: `missing` formats a refusal)
        and the checked value of each plain field it gives (not null, in its order), each set
        on `params` where it fills a core field; the structured ones are the dialect's."""
        if not isinstance(body, dict):
            raise invalid("The request body must be a JSON object.", None, "invalid_type")
        for name in self.required:
            if body.get(name) is None:
                raise invalid(missing.format(name), name, "missing_required_parameter")
        checks, targets = self.checks, self.targets
        values = {k: checks[k](v) for k, v in body.items() if v is not None and k in checks}
        for name, value in values.items():
            if (to := targets.get(name)) is not None:
                setattr(params, to, value)
        return body, values


def _admits_null(schema: Schema) -> bool:
    return {"type": "null"} in schema.get("anyOf", ())


def fill_shaped(fields: Fields, values: dict[str, Any], params: Any) -> None:
    """Checks and puts each declared shape's value into `params`, in declared order (a decoder
    calls it where it reads those fields, so a body's first fault is the one named)."""
    for name, (to, kind) in fields.shaped.items():
        value = values.get(name)
        if value is None:
            continue
        if kind.fill is not None:
            kind.fill(getattr(params, to), value, name)
        else:
            put(params, to, kind.check(value, name), kind.container)  # type: ignore[misc]


def _as_given(value: Any) -> Any:
    return value


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
