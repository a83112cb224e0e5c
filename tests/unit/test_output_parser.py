"""The streaming splitter of reasoning, text and tool calls."""

from __future__ import annotations

import pytest

from service.engine.output_parser import Channel, Markers, OutputParser, Segment, parse_tool_call


def _run(chunks: list[str], *, in_reasoning: bool = False) -> list[Segment]:
    parser = OutputParser(Markers(), in_reasoning=in_reasoning)
    out: list[Segment] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    out += parser.finish()
    merged: list[Segment] = []
    for s in out:
        if merged and merged[-1].channel is s.channel and s.channel is not Channel.TOOL_CALL:
            merged[-1] = Segment(s.channel, merged[-1].text + s.text)
        else:
            merged.append(s)
    return merged


TEXT = "<think>\nThe user wants x.\n</think>\n\nx"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 100])
def test_think_block_split_at_any_chunking(size: int) -> None:
    chunks = [TEXT[i : i + size] for i in range(0, len(TEXT), size)]
    assert _run(chunks) == [
        Segment(Channel.REASONING, "\nThe user wants x.\n"),
        Segment(Channel.TEXT, "x"),
    ]


def test_prompt_that_opens_reasoning() -> None:
    assert _run(["abc</th", "ink>\n\nhi"], in_reasoning=True) == [
        Segment(Channel.REASONING, "abc"),
        Segment(Channel.TEXT, "hi"),
    ]


def test_tool_call_body_is_one_segment() -> None:
    body = '\n{"name": "f", "arguments": {"a": "b"}}\n'
    text = f"<tool_call>{body}</tool_call>"
    segments = _run([text[i : i + 4] for i in range(0, len(text), 4)])
    assert segments == [Segment(Channel.TOOL_CALL, body)]
    call = parse_tool_call(body)
    assert call is not None and call.name == "f" and call.arguments == '{"a": "b"}'


def test_partial_marker_prefix_is_flushed_at_finish() -> None:
    assert _run(["a <thi"]) == [Segment(Channel.TEXT, "a <thi")]


def test_no_tool_markers_means_plain_text() -> None:
    parser = OutputParser(Markers(tool_start=None, tool_end=None))
    assert parser.feed("<tool_call>x</tool_call>") + parser.finish() == [
        Segment(Channel.TEXT, "<tool_call>x</tool_call>")
    ]


@pytest.mark.parametrize("body", ["not json", '{"arguments": {}}', "[1]"])
def test_malformed_tool_calls(body: str) -> None:
    assert parse_tool_call(body) is None


def test_hermes_arguments_stream_as_a_prefix_of_the_final_text() -> None:
    from service.engine.output_parser import HermesArgumentStreamer

    body = '\n{"name": "get_weather", "arguments": {"city": "paris", "unit": "c"}}\n'
    streamer = HermesArgumentStreamer()
    names, sent = [], ""
    for end in range(1, len(body) + 1):
        name, delta = streamer.update(body[:end])
        if name is not None:
            names.append(name)
        sent += delta
    assert names == ["get_weather"]
    call = parse_tool_call(body)
    assert call is not None
    final = streamer.final_arguments(body, call)
    assert final == '{"city": "paris", "unit": "c"}'
    assert final.startswith(sent) and sent  # the rest is sent with the done event


def test_hermes_streamer_waits_for_the_name() -> None:
    from service.engine.output_parser import HermesArgumentStreamer

    streamer = HermesArgumentStreamer()
    assert streamer.update('{"name": "get_we') == (None, "")
    assert streamer.update('{"name": "get_weather", "arguments": {"a') == ("get_weather", '{"a')
