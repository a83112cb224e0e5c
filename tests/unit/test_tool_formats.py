"""Each seed tool-call family, rendered by its real chat template, parsed while it streams.

The model output is what the family's own template writes for an assistant tool-call turn
(tests/fixtures/chat_templates); it is fed in random fragment sizes through the splitter and
the streamer, and the streamed argument deltas must join to the final (parsed) arguments.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.responses.events import EventAssembler
from mlx_responses.service.responses.tool_stream import ToolCallStreamer
from mlx_responses.service.text.output_parser import Channel, Markers, OutputParser
from mlx_responses.service.text.tool_formats import (
    HermesFormat,
    Llama3Format,
    MistralFormat,
    ParserFormat,
    Qwen3CoderFormat,
    ToolFormat,
    detect_format,
    format_for_template,
)

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.templates import CALLS, SCHEMAS, TEMPLATES, recorded_output


def _stream(fmt: ToolFormat, text: str, seed: int) -> list[ev.ResponseEvent]:
    """The splitter and the streamer over `text` in random fragments, as generation runs them."""
    markers = Markers(
        think_start="<think>",
        think_end="</think>",
        tool_start=fmt.start,
        tool_end=fmt.end,
        tool_leading=fmt.leading,
        tool_bare=fmt.bare,
    )
    parser = OutputParser(markers)
    streamer = ToolCallStreamer(fmt, SCHEMAS)
    assembler = EventAssembler(pb.Response(id="resp_x"))
    rng = random.Random(seed)
    events: list[ev.ResponseEvent] = []
    pos = 0

    def handle(segments: list[Any]) -> None:
        for segment in segments:
            if segment.channel is Channel.TOOL_CALL:
                finished = streamer.finish(assembler, segment.text, bare=segment.bare)
                if finished is None:  # not a call: the text as generated, as the pipeline does
                    text = f"{segment.opener}{segment.text}{segment.closer}"
                    events.extend(assembler.text_delta(text))
                else:
                    events.extend(finished)
            elif segment.channel is Channel.TEXT:
                events.extend(assembler.text_delta(segment.text))

    while pos < len(text):
        size = rng.randint(1, 9)
        handle(parser.feed(text[pos : pos + size]))
        pos += size
        if parser.channel is Channel.TOOL_CALL:
            body = parser.partial_tool_body
            events.extend(streamer.update(assembler, body, bare=parser.bare_span))
    handle(parser.finish())
    return events


def _check_calls(
    events: list[ev.ResponseEvent],
    expected: list[tuple[str, dict[str, Any]]],
    *,
    streamed: bool = True,
) -> None:
    """``streamed``: arguments stream while generated (a half-written call is sent whole)."""
    kinds = [e.type for e in events]
    assert ev.EVENT_TYPE_OUTPUT_TEXT_DELTA not in kinds, "no call text leaks into a message"
    added = [e for e in events if e.type == ev.EVENT_TYPE_OUTPUT_ITEM_ADDED]
    assert [e.output_item.item.function_call.name for e in added] == [n for n, _ in expected]
    for index, (_, arguments) in enumerate(expected):
        mine = [e for e in events if _index(e) == index]
        types = [e.type for e in mine]
        assert types[0] == ev.EVENT_TYPE_OUTPUT_ITEM_ADDED
        assert types[-2:] == [
            ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE,
            ev.EVENT_TYPE_OUTPUT_ITEM_DONE,
        ]
        deltas = [
            e.text_delta.delta
            for e in mine
            if e.type == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA
        ]
        done = next(e for e in mine if e.type == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE)
        assert "".join(deltas) == done.text_done.text
        assert json.loads(done.text_done.text) == arguments
        assert len(deltas) > 1 or not streamed, "arguments stream while they are generated"
        item = mine[-1].output_item.item.function_call
        assert item.arguments == done.text_done.text and item.status == pb.ITEM_STATUS_COMPLETED


def _text(events: list[ev.ResponseEvent]) -> str:
    return "".join(e.text_delta.delta for e in events if e.type == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA)


def _index(event: ev.ResponseEvent) -> int:
    payload = event.WhichOneof("payload")
    if payload == "output_item":
        return event.output_item.output_index
    if payload == "text_delta":
        return event.text_delta.output_index
    if payload == "text_done":
        return event.text_done.output_index
    return -1


FAMILIES = [
    ("qwen3_coder.jinja", Qwen3CoderFormat, CALLS),
    ("mistral_v0.3.jinja", MistralFormat, CALLS),
    ("devstral_small_2.jinja", MistralFormat, CALLS),
    ("llama3.2.jinja", Llama3Format, CALLS[:1]),  # the template allows one call per turn
]


@pytest.mark.parametrize(("template", "kind", "calls"), FAMILIES)
@pytest.mark.parametrize("seed", range(4))
def test_real_template_output_streams_to_the_final_arguments(
    template: str, kind: type[ToolFormat], calls: list[tuple[str, dict[str, Any]]], seed: int
) -> None:
    fmt = format_for_template((TEMPLATES / template).read_text())
    assert isinstance(fmt, kind)
    _check_calls(_stream(fmt, recorded_output(template, calls), seed), calls)


def test_formats_read_from_the_templates() -> None:
    devstral = format_for_template((TEMPLATES / "devstral_small_2.jinja").read_text())
    v03 = format_for_template((TEMPLATES / "mistral_v0.3.jinja").read_text())
    assert isinstance(devstral, MistralFormat) and devstral.args_form
    assert isinstance(v03, MistralFormat) and not v03.args_form
    bundled = json.loads(
        (Path(__file__).parents[2] / "service/assets/tiny-chat/tokenizer_config.json").read_text()
    )["chat_template"]
    assert isinstance(format_for_template(bundled), HermesFormat)
    assert format_for_template("{{ messages }}") is None


@pytest.mark.parametrize("seed", range(3))
def test_hermes_stream(seed: int) -> None:
    text = "".join(
        f'<tool_call>\n{{"name": "{n}", "arguments": {json.dumps(a)}}}\n</tool_call>\n'
        for n, a in CALLS
    )
    _check_calls(_stream(HermesFormat(), text, seed), CALLS)


def test_recorded_strings_look_like_the_family() -> None:
    assert recorded_output("devstral_small_2.jinja", CALLS).startswith(
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"'
    )
    assert recorded_output("mistral_v0.3.jinja", CALLS).startswith(
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {'
    )
    assert recorded_output("llama3.2.jinja", CALLS[:1]).startswith(
        '{"name": "get_weather", "parameters": {'
    )
    xml = recorded_output("qwen3_coder.jinja", CALLS)
    assert "<function=get_weather>\n<parameter=city>\nParis\n</parameter>" in xml


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        (Qwen3CoderFormat(), "\n<function=get_weather>\n<parameter=city>\nPar"),
        (MistralFormat(args_form=True), 'get_weather[ARGS]{"city": "Par'),
        (Llama3Format(), '{"name": "get_weather", "parameters": {"city": "Par'),
    ],
)
def test_unfinished_call_ends_with_what_streamed(fmt: ToolFormat, body: str) -> None:
    """A call cut by the token limit is still one item: its arguments are what was sent."""
    assembler = EventAssembler(pb.Response(id="resp_x"))
    streamer = ToolCallStreamer(fmt, SCHEMAS)
    events = streamer.update(assembler, body)
    finished = streamer.finish(assembler, body)
    assert finished is not None
    deltas = "".join(
        e.text_delta.delta
        for e in events + finished
        if e.type == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA
    )
    done = next(e for e in finished if e.type == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE)
    assert deltas == done.text_done.text and deltas.startswith('{"city": "Par')


def test_malformed_span_is_not_a_call() -> None:
    assembler = EventAssembler(pb.Response(id="resp_x"))
    streamer = ToolCallStreamer(MistralFormat(args_form=True), SCHEMAS)
    assert streamer.finish(assembler, "no call here") is None


class _Tokenizer:
    """The attributes detect_format reads from mlx-lm's TokenizerWrapper."""

    def __init__(self, template: str, parser: Any = None, start: str | None = None) -> None:
        self._tokenizer = type("HF", (), {"chat_template": template})()
        self.tool_parser = parser
        self.tool_call_start = start
        self.tool_call_end = "</tool_call>" if start else None


def test_detect_format_keeps_mlx_lm_parsers_beyond_the_seed() -> None:
    from mlx_lm.tool_parsers import glm47, json_tools

    glm = "<tool_call>{{ name }}<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>"
    found = detect_format(_Tokenizer(glm, glm47.parse_tool_call, glm47.tool_call_start))
    assert isinstance(found, ParserFormat) and found.start == glm47.tool_call_start
    hermes = _Tokenizer("<tool_call>", json_tools.parse_tool_call, "<tool_call>")
    assert isinstance(detect_format(hermes), HermesFormat)
    assert isinstance(detect_format(_Tokenizer("{{ messages }}")), HermesFormat)
    (call,) = found.parse("get_weather<arg_key>city</arg_key><arg_value>paris</arg_value>", {})
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "paris"}


def _hermes(calls: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(
        f'{{"name": "{n}", "arguments": {json.dumps(a)}}}\n</tool_call>\n' for n, a in calls
    )


def _qwen3_coder_without_openers() -> str:
    return recorded_output("qwen3_coder.jinja", CALLS).replace("<tool_call>\n", "")


# Calls the model half-wrote under `tool_choice: auto`: their opener left out, sometimes the
# closer too (Qwen3-Coder writes `<function=...>` straight away; Qwen2.5 the call's object).
HALF_WRITTEN = [
    pytest.param(Qwen3CoderFormat(), _qwen3_coder_without_openers(), id="qwen3_coder-no-opener"),
    pytest.param(
        Qwen3CoderFormat(),
        _qwen3_coder_without_openers().replace("</tool_call>", ""),
        id="qwen3_coder-no-opener-no-closer",
    ),
    pytest.param(HermesFormat(), _hermes(CALLS), id="hermes-no-opener"),
    pytest.param(
        HermesFormat(), _hermes(CALLS[:1]).replace("</tool_call>", ""), id="hermes-bare-object"
    ),
]


@pytest.mark.parametrize(("fmt", "text"), HALF_WRITTEN)
@pytest.mark.parametrize("seed", range(3))
def test_a_half_written_call_is_recovered(fmt: ToolFormat, text: str, seed: int) -> None:
    calls = CALLS[:1] if text.count('"name"') == 1 else CALLS
    assert fmt.start not in text
    _check_calls(_stream(fmt, text, seed), calls, streamed=False)


@pytest.mark.parametrize("seed", range(3))
def test_text_before_a_half_written_call_stays_text(seed: int) -> None:
    text = "Let me check.\n" + _qwen3_coder_without_openers()
    events = _stream(Qwen3CoderFormat(), text, seed)
    assert _text(events) == "Let me check.\n"
    added = [e for e in events if e.type == ev.EVENT_TYPE_OUTPUT_ITEM_ADDED]
    assert [e.output_item.item.function_call.name for e in added[1:]] == [n for n, _ in CALLS]


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        # A tool the request does not offer: prose about markup, not a call.
        (Qwen3CoderFormat(), "Write <function=main> then </function> to close it."),
        (Qwen3CoderFormat(), "Unclosed <function=get_weather> in the docs"),
        (HermesFormat(), 'The record is {"name": "Alice", "age": 3}.'),
        (HermesFormat(), 'A call looks like {"name": "get_weather", "arguments": oops'),
    ],
)
@pytest.mark.parametrize("seed", range(3))
def test_text_that_only_looks_like_a_bare_call_stays_text_as_generated(
    fmt: ToolFormat, text: str, seed: int
) -> None:
    events = _stream(fmt, text, seed)
    assert _text(events) == text
    assert not any(
        e.type == ev.EVENT_TYPE_OUTPUT_ITEM_ADDED and e.output_item.item.HasField("function_call")
        for e in events
    )
