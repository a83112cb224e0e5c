"""The tool-call formats of the seed: Hermes/Qwen JSON, Mistral, Llama 3 JSON, Qwen3-Coder XML.

Each format reads a call span two ways: `partial` while it is generated (the calls seen so far,
with the arguments text that is already certain, so it can stream), and `parse` once it is
whole (authoritative). For every format the streamed arguments are a prefix of the parsed ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mlx_responses.service.text.json_scan import skip_blank, value_end
from mlx_responses.service.text.json_text import loads_bounded

Schemas = Mapping[str, dict[str, Any]]  # function name -> its `parameters` schema


@dataclass(frozen=True)
class ParsedToolCall:
    """A tool call parsed from a call span."""

    name: str
    arguments: str


@dataclass(frozen=True)
class PartialCall:
    """A call seen in a span still being generated; `arguments` only grows."""

    name: str
    arguments: str
    complete: bool


_NAME = r'"((?:[^"\\]|\\.)*)"'


def _head(argument_keys: str) -> re.Pattern[str]:
    return re.compile(r'\{\s*"name"\s*:\s*' + _NAME + r'\s*,\s*"(?:' + argument_keys + r')"\s*:\s*')


def _arguments_text(raw: str, value: Any) -> str:
    """The arguments as generated when they are a JSON object, else re-encoded."""
    if isinstance(value, str):
        # Some models write the arguments as a JSON string holding the object.
        try:
            inner = loads_bounded(value)
        except ValueError:
            return value
        return json.dumps(inner, ensure_ascii=False) if isinstance(inner, dict) else value
    try:
        if loads_bounded(raw) == value:
            return raw
    except ValueError:
        pass
    return json.dumps(value, ensure_ascii=False)


def _json_objects(
    body: str, pos: int, head: re.Pattern[str], separators: str
) -> tuple[list[PartialCall], int]:
    """Calls written as `{"name": ..., "<args key>": {...}}` objects, one after another."""
    calls: list[PartialCall] = []
    while True:
        pos = skip_blank(body, pos)
        match = head.match(body, pos)
        if match is None:
            return calls, pos
        name = loads_bounded(f'"{match.group(1)}"')
        start = match.end()
        end = value_end(body, start)
        arguments = body[start:end] if end is not None else body[start:]
        whole = value_end(body, pos)
        calls.append(PartialCall(name, arguments, whole is not None))
        if whole is None:
            return calls, len(body)
        pos = skip_blank(body, whole)
        while pos < len(body) and body[pos] in separators:
            pos = skip_blank(body, pos + 1)


def _decode_objects(body: str, keys: tuple[str, ...], separators: str) -> list[ParsedToolCall]:
    decoder = json.JSONDecoder()
    calls: list[ParsedToolCall] = []
    pos = skip_blank(body, 0)
    while pos < len(body):
        value, end = decoder.raw_decode(body, pos)
        calls.append(_call_of(value, body[pos:end], keys))
        pos = skip_blank(body, end)
        while pos < len(body) and body[pos] in separators:
            pos = skip_blank(body, pos + 1)
    return calls


def _call_of(value: Any, raw: str, keys: tuple[str, ...]) -> ParsedToolCall:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ValueError("a tool call needs a string 'name'")
    key = next((k for k in keys if k in value), None)
    arguments = value[key] if key is not None else {}
    raw_arguments = ""
    if key is not None:
        match = _head("|".join(re.escape(k) for k in keys)).match(raw)
        if match is not None:
            end = value_end(raw, match.end())
            raw_arguments = raw[match.end() : end] if end is not None else ""
    return ParsedToolCall(value["name"], _arguments_text(raw_arguments, arguments))


class ToolFormat:
    """A family's call markers and readers; the base reads nothing while streaming."""

    kind = "generic"

    def __init__(
        self, start: str, end: str | None, leading: str | None = None, bare: str | None = None
    ) -> None:
        self.start = start  # opens a call span
        self.end = end  # closes it; None: the span runs to the end of generation
        self.leading = leading  # opens a span only at the very start of the answer
        # How a call begins when the model leaves out `start` (a half-written call): such a span
        # is a call only if it parses and names a tool of the request, else it stays text.
        self.bare = bare

    def partial(self, body: str, schemas: Schemas) -> list[PartialCall]:
        """The calls of a growing span (empty: this format does not stream arguments)."""
        return []

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        """The calls of a whole span; ValueError when it is malformed."""
        raise NotImplementedError


class HermesFormat(ToolFormat):
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes, Qwen 2.5/3)."""

    kind = "hermes"
    _HEAD = _head("arguments")

    def __init__(self) -> None:
        # Qwen2.5/3 sometimes write the call's object without its `<tool_call>`.
        super().__init__("<tool_call>", "</tool_call>", bare='{"name": "')

    def partial(self, body: str, schemas: Schemas) -> list[PartialCall]:
        return _json_objects(body, 0, self._HEAD, "")[0][:1]

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        calls = _decode_objects(body, ("arguments", "parameters"), "")
        if len(calls) != 1:
            raise ValueError("a <tool_call> holds one call")
        return calls


class MistralFormat(ToolFormat):
    """`[TOOL_CALLS]name[ARGS]{...}` (v11+, repeated per call) or `[TOOL_CALLS] [{...}, ...]`."""

    kind = "mistral"
    _HEADER = re.compile(r"\s*([\w.\-]+)\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?\[ARGS\]\s*")
    _OBJECT = _head("arguments")

    def __init__(self, *, args_form: bool) -> None:
        super().__init__("[TOOL_CALLS]", None)
        self.args_form = args_form  # what the template renders: forced calls use that form

    def partial(self, body: str, schemas: Schemas) -> list[PartialCall]:
        start = skip_blank(body, 0)
        if body.startswith("[", start) and not body.startswith("[TOOL_CALLS]", start):
            return _json_objects(body, start + 1, self._OBJECT, ",")[0]
        calls: list[PartialCall] = []
        for piece in body.split(self.start):
            match = self._HEADER.match(piece)
            if match is None:
                break
            end = value_end(piece, match.end())
            arguments = piece[match.end() : end] if end is not None else piece[match.end() :]
            calls.append(PartialCall(match.group(1), arguments, end is not None))
            if end is None:
                break
        return calls

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        start = skip_blank(body, 0)
        if body.startswith("[", start) and not body.startswith("[TOOL_CALLS]", start):
            listed = loads_bounded(body)
            if not isinstance(listed, list) or not listed:
                raise ValueError("the JSON form is a non-empty list of calls")
            raw = self.partial(body, schemas)
            out = []
            for i, value in enumerate(listed):
                arguments_raw = raw[i].arguments if i < len(raw) else ""
                call = _call_of(value, "", ("arguments",))
                arguments = value.get("arguments", {}) if isinstance(value, dict) else {}
                out.append(ParsedToolCall(call.name, _arguments_text(arguments_raw, arguments)))
            return out
        decoder = json.JSONDecoder()
        calls = []
        for piece in body.split(self.start):
            if not piece.strip():
                continue
            match = self._HEADER.match(piece)
            if match is None:
                raise ValueError("expected name[ARGS]")
            value, end = decoder.raw_decode(piece, match.end())
            if piece[end:].strip():
                raise ValueError("text after the arguments")
            calls.append(
                ParsedToolCall(match.group(1), _arguments_text(piece[match.end() : end], value))
            )
        if not calls:
            raise ValueError("no call")
        return calls


class Llama3Format(ToolFormat):
    """`{"name": ..., "parameters": {...}}` as the whole answer, or after `<|python_tag|>`."""

    kind = "llama3"
    _HEAD = _head("parameters|arguments")

    def __init__(self) -> None:
        super().__init__("<|python_tag|>", None, leading="{")

    def partial(self, body: str, schemas: Schemas) -> list[PartialCall]:
        return _json_objects(body, 0, self._HEAD, ";")[0]

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        calls = _decode_objects(body, ("parameters", "arguments"), ";")
        if not calls:
            raise ValueError("no call")
        return calls


_TEXT_TYPES = {"string", None}
_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>")
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]+)>")
_PARAMETER_END = "</parameter>"
_FUNCTION_END = "</function>"


def _param_type(schema: Any) -> str | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def _xml_value(raw: str, schema: Any) -> Any:
    """A parameter's text as its schema's type; text that does not convert stays text."""
    kind = _param_type(schema)
    if kind in _TEXT_TYPES:
        return raw
    text = raw.strip()
    if kind == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        value = loads_bounded(text)
    except ValueError:
        return raw
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _held_back(text: str, marker: str) -> int:
    """How many trailing characters of `text` could begin `marker`."""
    for n in range(min(len(marker), len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


class Qwen3CoderFormat(ToolFormat):
    """`<tool_call><function=NAME><parameter=KEY>value</parameter>...</function></tool_call>`.

    The JSON arguments are rebuilt while the XML streams, exactly as `json.dumps` writes them:
    a text parameter streams character by character, a typed one when its value is closed.
    """

    kind = "qwen3_coder"

    def __init__(self) -> None:
        # Qwen3-Coder models under `tool_choice: auto` sometimes open `<function=` directly.
        super().__init__("<tool_call>", "</tool_call>", bare="<function=")

    def _read(
        self, body: str, schemas: Schemas, pos: int = 0
    ) -> tuple[str, str, dict[str, Any], int] | None:
        """The call at `pos`: its name, JSON text so far, values, and its end (-1: still open)."""
        match = _FUNCTION.match(body, pos)
        if match is None:
            return None
        name = match.group(1).strip()
        properties = schemas.get(name, {}).get("properties", {})
        if not isinstance(properties, dict):
            properties = {}
        text, pos = "{", match.end()
        values: dict[str, Any] = {}
        while True:
            param = _PARAMETER.match(body, pos)
            if param is None:
                rest = body[pos:].lstrip()
                if not rest.startswith(_FUNCTION_END):
                    return name, text, values, -1
                return name, text + "}", values, len(body) - len(rest) + len(_FUNCTION_END)
            key = param.group(1).strip()
            schema = properties.get(key)
            text += (", " if values else "") + json.dumps(key, ensure_ascii=False) + ": "
            start = param.end()
            if start >= len(body):
                return name, text, values, -1
            if body[start] == "\n":
                start += 1
            close = body.find(_PARAMETER_END, start)
            is_text = _param_type(schema) in _TEXT_TYPES
            if close < 0:
                if is_text:
                    raw = body[start:]
                    raw = raw[: len(raw) - _held_back(raw, "\n" + _PARAMETER_END)]
                    text += '"' + json.dumps(raw, ensure_ascii=False)[1:-1]
                return name, text, values, -1
            raw = body[start:close]
            raw = raw[:-1] if raw.endswith("\n") else raw
            values[key] = _xml_value(raw, schema)
            text += json.dumps(values[key], ensure_ascii=False)
            pos = close + len(_PARAMETER_END)

    def _calls(self, body: str, schemas: Schemas) -> list[tuple[str, str, dict[str, Any], int]]:
        """Each `<function=...>` of the span in turn (one after another when the model left
        out the `<tool_call>` between them); the last may still be open."""
        out: list[tuple[str, str, dict[str, Any], int]] = []
        pos = 0
        while (read := self._read(body, schemas, pos)) is not None:
            out.append(read)
            if read[3] < 0:
                break
            pos = read[3]
        return out

    def partial(self, body: str, schemas: Schemas) -> list[PartialCall]:
        return [
            PartialCall(name, text, end >= 0) for name, text, _, end in self._calls(body, schemas)
        ]

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        calls = self._calls(body, schemas)
        if not calls or any(end < 0 for *_, end in calls):
            raise ValueError("expected <function=...>...</function>")
        return [
            ParsedToolCall(name, json.dumps(values, ensure_ascii=False))
            for name, _, values, _ in calls
        ]


class ParserFormat(ToolFormat):
    """Another mlx-lm tool parser: the whole call is sent at the end of its span."""

    def __init__(self, start: str, end: str | None, parser: Callable[[str, Any], Any]) -> None:
        super().__init__(start, end)
        self._parser = parser

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        tools = [
            {"type": "function", "function": {"name": n, "parameters": p}}
            for n, p in schemas.items()
        ]
        try:
            data = self._parser(body, tools)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(str(exc)) from exc
        out = []
        for call in data if isinstance(data, list) else [data]:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError("a tool call needs a string 'name'")
            arguments = call.get("arguments", {})
            text = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments, ensure_ascii=False)
            )
            out.append(ParsedToolCall(call["name"], text))
        return out


def template_text(hf_tokenizer: Any) -> str:
    template = getattr(hf_tokenizer, "chat_template", None)
    if isinstance(template, dict):
        return "\n".join(str(t) for t in template.values())
    return template if isinstance(template, str) else ""


def format_for_template(template: str) -> ToolFormat | None:
    """The seed format a chat template renders tool calls in, if it is one of them."""
    if "<function=" in template and "<parameter=" in template:
        return Qwen3CoderFormat()
    if "[TOOL_CALLS]" in template:
        return MistralFormat(args_form="[ARGS]" in template)
    if "<|start_header_id|>" in template and '"parameters": ' in template:
        return Llama3Format()
    if "<tool_call>" in template:
        return HermesFormat()
    return None


# mlx-lm parsers of the seed formats, which the classes above replace (they also stream).
_SEED_PARSERS = {"json_tools", "mistral", "qwen3_coder"}


def detect_format(tokenizer: Any) -> ToolFormat:
    """The loaded model's format: from its chat template, else mlx-lm's own parser, else Hermes.

    A family mlx-lm knows beyond the seed (GLM, MiniMax, Kimi, Gemma, ...) keeps mlx-lm's
    parser, even when its template also says `<tool_call>`.
    """
    found = format_for_template(template_text(tokenizer._tokenizer))
    parser = getattr(tokenizer, "tool_parser", None)
    start = getattr(tokenizer, "tool_call_start", None)
    module = str(getattr(parser, "__module__", "")).rsplit(".", 1)[-1]
    generic = found is None or isinstance(found, HermesFormat)
    if parser is not None and start and module not in _SEED_PARSERS and generic:
        return ParserFormat(start, getattr(tokenizer, "tool_call_end", None) or None, parser)
    return found or HermesFormat()
