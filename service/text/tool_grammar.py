"""llguidance Lark grammars that force tool calls in the loaded model's own format.

A forced call (`tool_choice` required, a named function, `allowed_tools`) is generated under a
grammar that only admits calls of the allowed functions, written exactly as the model's chat
template renders them, with arguments that validate against each function's `parameters`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlx_responses.service.text.grammars import LENIENT
from mlx_responses.service.text.json_bounds import JsonBounds, bound_schema
from mlx_responses.service.text.json_quoted_grammar import UnquotableGrammarError, quote_lark
from mlx_responses.service.text.tool_formats import (
    HermesFormat,
    Llama3Format,
    MistralFormat,
    Qwen3CoderFormat,
    ToolFormat,
)

# Separators as `tojson` writes them, which is how templates render calls in the history;
# keywords llguidance does not implement are left unenforced (grammars.LENIENT).
_COMPACT = {**LENIENT, "item_separator": ", ", "key_separator": ": "}
_PARAMETER_CLOSE = "\n</parameter>\n"
_INTEGER = r"-?(0|[1-9][0-9]{0,14})"
_NUMBER = _INTEGER + r"(\.[0-9]{1,6})?"

_REGEX_META = set("\\.+*?()|[]{}^$#&-~/")

Literal = Callable[[str], str]  # text -> a Lark expression producing it (string or token)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CustomFormat:
    """A custom tool's input format: `text` (free), `lark` or `regex` with its definition."""

    syntax: str
    definition: str = ""


@dataclass(frozen=True)
class Function:
    """An allowed function: its name and `parameters` schema (a custom tool: its format)."""

    name: str
    parameters: dict[str, Any]
    custom: CustomFormat | None = None


@dataclass(frozen=True)
class Reasoning:
    """The model's reasoning markers, and whether the prompt already opened a block."""

    start: str
    end: str
    opened: bool


class UnsupportedFormatError(ValueError):
    """The loaded model's tool-call format has no grammar here."""


def _regex(text: str) -> str:
    """`text` as a Lark regex body."""
    out = []
    for c in text:
        if c == "\n":
            out.append("\\n")
        elif c in _REGEX_META:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


# Keywords whose values are data, not schemas: a `$ref` there is not a reference.
_DATA = frozenset({"const", "enum", "default", "examples"})


def _embedded(schema: Any, at: str) -> Any:
    """`schema` to be placed at JSON pointer `at` of a larger document: its local references
    (`#`, `#/$defs/X`, ...) rewritten to point where their targets now are.

    A tool's `parameters` is its own document; the grammar nests it in a call's envelope, where
    `#/$defs/Color` (pydantic writes one for every enum and nested model) would otherwise name a
    definition at the envelope's root that does not exist.
    """
    if isinstance(schema, list):
        return [_embedded(item, at) for item in schema]
    if not isinstance(schema, dict) or not at or isinstance(schema.get("$id"), str):
        return schema  # a schema with its own `$id` is the base its references resolve against
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#"):
            out[key] = "#" + at + value[1:]
        elif key in _DATA:
            out[key] = value
        else:
            out[key] = _embedded(value, at)
    return out


def _dereferenced(schema: Any, root: dict[str, Any]) -> Any:
    """`schema` with its own local `$ref` (to a definition in `root`) followed, a few deep."""
    for _ in range(8):
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in filter(None, ref[1:].split("/")):
            key = part.replace("~1", "/").replace("~0", "~")
            target = target.get(key) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return schema
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _json(schema: dict[str, Any], style: Mapping[str, Any] = _COMPACT) -> str:
    return "%json " + json.dumps({"x-guidance": style, **schema}, ensure_ascii=False)


class _Builder:
    def __init__(self, literal: Literal, bounds: JsonBounds) -> None:
        self.literal = literal
        self.bounds = bounds
        self.rules: list[str] = []
        self.subgrammars: dict[str, str] = {}  # name -> Lark grammar, referenced as @name

    # --- custom tools: the input string under the tool's grammar ----------------------------
    def custom_json(self, fmt: CustomFormat, i: int) -> str:
        """The input as a JSON string value (quotes included) that follows the grammar."""
        if fmt.syntax == "regex":
            return _json({"type": "string", "pattern": f"^(?:{fmt.definition})$"})
        if fmt.syntax == "lark":
            try:
                quoted = quote_lark(fmt.definition)
            except UnquotableGrammarError as exc:
                log.warning("a custom tool's grammar is not enforced inside JSON: %s", exc)
            else:
                self.subgrammars[f"custom{i}"] = quoted
                return f'"\\"" @custom{i} "\\""'
        return _json({"type": "string"})

    def custom_raw(self, fmt: CustomFormat, i: int, close: str) -> str:
        """The input written as is, then `close` (XML formats)."""
        if fmt.syntax == "regex":
            return f"/{fmt.definition}/ {json.dumps(close)}"
        if fmt.syntax == "lark":
            self.subgrammars[f"custom{i}"] = fmt.definition
            return f"@custom{i} {json.dumps(close)}"
        return self.rule(f"input{i}", f"/(?s:.*){_regex(close)}/", "[lazy]")

    def custom_call(self, fn: Function, i: int, arguments_key: str) -> str:
        """`{"name": ..., "<arguments_key>": {"input": ...}}` as the template writes it."""
        assert fn.custom is not None
        head = json.dumps({"name": fn.name, arguments_key: {}}, ensure_ascii=False)[:-2]
        head += json.dumps("input") + ": "
        return f'{json.dumps(head)} {self.custom_json(fn.custom, i)} "}}}}"'

    def rule(self, name: str, body: str, options: str = "") -> str:
        self.rules.append(f"{name}{options}: {body}")
        return name

    def params(self, function: Function) -> dict[str, Any]:
        schema = function.parameters or {"type": "object"}
        return bound_schema(schema, self.bounds)

    def envelope(self, function: Function, arguments_key: str, at: str = "") -> dict[str, Any]:
        """The call's JSON, placed at JSON pointer `at` of its grammar's schema."""
        return {
            "type": "object",
            "properties": {
                "name": {"const": function.name},
                arguments_key: _embedded(self.params(function), f"{at}/properties/{arguments_key}"),
            },
            "required": ["name", arguments_key],
            "additionalProperties": False,
        }

    # --- one call per format ----------------------------------------------------------------
    def hermes(self, fn: Function, i: int) -> str:
        body = (
            self.custom_call(fn, i, "arguments")
            if fn.custom
            else _json(self.envelope(fn, "arguments"))
        )
        return self.rule(
            f"call{i}",
            f'{self.literal("<tool_call>")} "\\n" {body} "\\n" {self.literal("</tool_call>")}',
        )

    def mistral_args(self, fn: Function, i: int) -> str:
        arguments = _json(self.params(fn))
        if fn.custom is not None:
            value = self.custom_json(fn.custom, i)
            arguments = f'{json.dumps("{" + json.dumps("input") + ": ")} {value} "}}"'
        return self.rule(
            f"call{i}",
            f"{self.literal('[TOOL_CALLS]')} {json.dumps(fn.name)} "
            f"{self.literal('[ARGS]')} {arguments}",
        )

    def xml_value(self, schema: Any, name: str, root: dict[str, Any]) -> str:
        """A parameter's value then its closing tag; `root`: the function's `parameters`,
        bounded."""
        schema = _dereferenced(schema, root)
        kind = schema.get("type") if isinstance(schema, dict) else None
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        close = _regex(_PARAMETER_CLOSE)
        if kind == "integer":
            return self.rule(name.upper(), f"/{_INTEGER}{close}/")
        if kind == "number":
            return self.rule(name.upper(), f"/{_NUMBER}{close}/")
        if kind == "boolean":
            return self.rule(name.upper(), f"/(true|false){close}/")
        if kind in ("string", None):
            enum = schema.get("enum") if isinstance(schema, dict) else None
            if isinstance(enum, list) and all(isinstance(e, str) for e in enum):
                options = " | ".join(json.dumps(e + _PARAMETER_CLOSE) for e in enum)
                return self.rule(name, options)
            limit = (
                schema.get("maxLength", self.bounds.max_string_length)
                if isinstance(schema, dict)
                else self.bounds.max_string_length
            )
            # Lazy: the value ends at the first closing tag, within the string bound.
            return self.rule(name, f"/(?s:.{{0,{int(limit)}}}){close}/", "[lazy]")
        sub = bound_schema(schema, self.bounds)
        embedded = _embedded(sub, "/$defs/parameters")
        if embedded != sub:
            # Its references point into the parameters: they come along, under $defs.
            # Re-rooted under $defs, it is no longer a resource of its own: no `$id`.
            params = {k: v for k, v in root.items() if k != "$id"}
            sub = {**embedded, "$defs": {"parameters": _embedded(params, "/$defs/parameters")}}
        return self.rule(name, f"{_json(sub)} {json.dumps(_PARAMETER_CLOSE)}")

    def qwen3_coder(self, fn: Function, i: int) -> str:
        if fn.custom is not None:
            head = json.dumps(f"\n<function={fn.name}>\n<parameter=input>\n")
            value = self.custom_raw(fn.custom, i, _PARAMETER_CLOSE)
            body = f"{head} {value} {json.dumps('</function>' + chr(10))}"
            return self.rule(
                f"call{i}", f"{self.literal('<tool_call>')} {body} {self.literal('</tool_call>')}"
            )
        properties = (fn.parameters or {}).get("properties", {})
        required = set((fn.parameters or {}).get("required", []))
        root = self.params(fn)  # what the values' references resolve against
        parts = []
        for j, (key, schema) in enumerate(
            properties.items() if isinstance(properties, dict) else []
        ):
            value = self.xml_value(schema, f"v{i}_{j}", root)
            part = f"{json.dumps(f'<parameter={key}>' + chr(10))} {value}"
            parts.append(f"({part})" + ("" if key in required else "?"))
        head = json.dumps(f"\n<function={fn.name}>\n")
        body = " ".join([head, *parts, json.dumps("</function>\n")])
        return self.rule(
            f"call{i}", f"{self.literal('<tool_call>')} {body} {self.literal('</tool_call>')}"
        )


def tool_grammar(
    fmt: ToolFormat,
    functions: Sequence[Function],
    *,
    required: bool,
    parallel: bool,
    literal: Literal,
    bounds: JsonBounds,
    reasoning: Reasoning | None = None,
    answer_schema: dict[str, Any] | None = None,
    subgrammars: dict[str, str] | None = None,
) -> str:
    """A grammar admitting only calls of `functions` (or, unless `required`, an answer).

    The answer is free text that never opens a call, or `answer_schema` JSON when given.
    Custom tools' Lark grammars are referenced as `@name` and put into `subgrammars`.
    """
    b = _Builder(literal, bounds)
    if subgrammars is not None:
        b.subgrammars = subgrammars
    if fmt.kind == "harmony":
        start = _harmony(b, functions, required=required, answer_schema=answer_schema)
        return "\n".join([f"start: {start}", *b.rules])
    if isinstance(fmt, HermesFormat | Qwen3CoderFormat):
        build = b.hermes if isinstance(fmt, HermesFormat) else b.qwen3_coder
        one = b.rule("call", " | ".join(build(fn, i) for i, fn in enumerate(functions)))
        calls = b.rule("calls", f'{one} ("\\n" {one})*' if parallel else one)
    elif isinstance(fmt, MistralFormat) and fmt.args_form:
        one = b.rule("call", " | ".join(b.mistral_args(fn, i) for i, fn in enumerate(functions)))
        calls = b.rule("calls", f"{one}+" if parallel else one)
    elif isinstance(fmt, MistralFormat):
        # The JSON list form holds every call in one JSON value: a custom tool's input is a
        # plain string there (a regex still applies as its pattern).
        envelopes = [
            b.envelope(_as_function(fn), "arguments", f"/items/anyOf/{k}")
            for k, fn in enumerate(functions)
        ]
        for envelope in envelopes:
            # The template renders a 9-character id into each call, so models write one.
            envelope["properties"]["id"] = {"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"}
        listed = {
            "type": "array",
            "items": {"anyOf": envelopes},
            "minItems": 1,
            "maxItems": bounds.max_items if parallel else 1,
        }
        calls = b.rule("calls", f'{literal("[TOOL_CALLS]")} " " {_json(listed)}')
    elif isinstance(fmt, Llama3Format):
        plain = [fn for fn in functions if fn.custom is None]
        envelopes = [b.envelope(fn, "parameters", f"/anyOf/{k}") for k, fn in enumerate(plain)]
        options = [_json({"anyOf": envelopes})] if envelopes else []
        options += [
            b.custom_call(fn, i, "parameters") for i, fn in enumerate(functions) if fn.custom
        ]
        calls = b.rule("calls", " | ".join(options))
    else:
        raise UnsupportedFormatError(f"no grammar for the {fmt.kind} tool-call format")
    if required:
        answer = calls
    elif answer_schema is not None:
        # The answer is written as text.format output is everywhere: compact, no blanks.
        answer = f"{_json(bound_schema(answer_schema, bounds), LENIENT)} | {calls}"
    elif fmt.leading is not None:
        # A free answer that does not start like a call.
        b.rule("TEXT", f"/(?s:.*)/ & ~/\\s*{_regex(fmt.leading)}(?s:.*)/")
        answer = f"TEXT | {calls}"
    else:
        marker = literal(fmt.start)
        if marker.startswith("<["):  # a special token: plain text can never produce it
            b.rule("TEXT", "/(?s:.*)/")
        else:
            b.rule("TEXT", f"/(?s:.*)/ & ~/(?s:.*){_regex(fmt.start)}(?s:.*)/")
        answer = f"TEXT {calls}?"
    start = b.rule("answer", answer)
    if reasoning is not None:
        end = literal(reasoning.end)
        if end.startswith("<["):  # a special token ends the thought: text cannot contain it
            block = f"/(?s:.*)/ {end}"
        else:
            block = b.rule("thought", f"/(?s:.*){_regex(reasoning.end)}/", "[lazy]")
        # Bounded: a model denied its free answer would otherwise pad with blanks to the limit.
        block = f"{block} /\\s{{0,8}}/"
        if not reasoning.opened:
            block = f"({literal(reasoning.start)} {block})?"
        start = f"{block} {start}"
    return "\n".join([f"start: {start}", *b.rules])


def _harmony(
    b: _Builder,
    functions: Sequence[Function],
    *,
    required: bool,
    answer_schema: dict[str, Any] | None,
) -> str:
    """A harmony turn after the prompt's `<|start|>assistant`: reasoning on `analysis`, a
    preamble on `commentary`, then a call of one of `functions` (`<|call|>` ends the turn) or,
    unless `required`, the `final` answer (`answer_schema` JSON when given). Harmony writes one
    call per turn: the client runs it and the next turn continues."""
    t = b.literal
    channel, message, end = t("<|channel|>"), t("<|message|>"), t("<|end|>")
    again = f'{t("<|start|>")} "assistant"'
    thought = f'{channel} "analysis" {message} /(?s:.*)/ {end} {again}'
    preamble = f'{channel} "commentary" {message} /(?s:.*)/ {end} {again}'
    constrain = t("<|constrain|>")
    # Without the token in the vocabulary, the content type follows a blank.
    json_type = f'{constrain} "json"' if constrain.startswith("<[") else '"json"'
    options = []
    for i, fn in enumerate(functions):
        if fn.custom is not None:
            value = b.custom_json(fn.custom, i)
            arguments = f'{json.dumps("{" + json.dumps("input") + ": ")} {value} "}}"'
        else:  # compact, as gpt-oss writes arguments
            arguments = _json(b.params(fn), LENIENT)
        head = json.dumps(f"commentary to=functions.{fn.name} ")
        options.append(
            b.rule(
                f"call{i}",
                f"{channel} {head} {json_type} {message} {arguments} {t('<|call|>')}",
            )
        )
    calls = b.rule("call", " | ".join(options)) if options else None
    if answer_schema is not None:
        text = _json(bound_schema(answer_schema, b.bounds), LENIENT)
    else:
        text = "/(?s:.*)/"
    # The answer's <|return|> is the tokenizer's end token, which a grammar allows once whole.
    final = b.rule("final", f'{channel} "final" {message} {text}')
    endings = [calls] if calls is not None else []
    if not required or calls is None:
        endings.append(final)
    return f"({thought})? ({preamble})? ({' | '.join(endings)})"


def _as_function(fn: Function) -> Function:
    """A custom tool as a plain function of one string (its regex as the string's pattern)."""
    if fn.custom is None or fn.custom.syntax != "regex":
        return fn
    schema = {
        "type": "object",
        "properties": {"input": {"type": "string", "pattern": f"^(?:{fn.custom.definition})$"}},
        "required": ["input"],
        "additionalProperties": False,
    }
    return Function(fn.name, schema)
