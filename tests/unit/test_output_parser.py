"""The streaming splitter of reasoning, text and tool calls."""

from __future__ import annotations

import pytest
from mlx_responses.service.text.output_parser import Channel, Markers, OutputParser, Segment
from mlx_responses.service.text.tool_formats import HermesFormat


def _run(
    chunks: list[str], markers: Markers | None = None, *, in_reasoning: bool = False
) -> list[Segment]:
    parser = OutputParser(markers or Markers(), in_reasoning=in_reasoning)
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
    assert segments == [Segment(Channel.TOOL_CALL, body, "<tool_call>", "</tool_call>")]
    (call,) = HermesFormat().parse(body, {})
    assert call.name == "f" and call.arguments == '{"a": "b"}'


def test_partial_marker_prefix_is_flushed_at_finish() -> None:
    assert _run(["a <thi"]) == [Segment(Channel.TEXT, "a <thi")]


def test_no_tool_markers_means_plain_text() -> None:
    parser = OutputParser(Markers(tool_start=None, tool_end=None))
    assert parser.feed("<tool_call>x</tool_call>") + parser.finish() == [
        Segment(Channel.TEXT, "<tool_call>x</tool_call>")
    ]


@pytest.mark.parametrize("body", ["not json", '{"arguments": {}}', "[1]"])
def test_malformed_tool_calls(body: str) -> None:
    with pytest.raises(ValueError):
        HermesFormat().parse(body, {})


LEADING = Markers(tool_start="<|python_tag|>", tool_end=None, tool_leading="{")


@pytest.mark.parametrize("size", [1, 2, 7])
def test_leading_marker_opens_a_call_only_at_the_start(size: int) -> None:
    text = '\n {"name": "f", "parameters": {}}'
    segments = _run([text[i : i + size] for i in range(0, len(text), size)], LEADING)
    assert segments == [Segment(Channel.TOOL_CALL, '{"name": "f", "parameters": {}}')]
    prose = 'Use {"a": 1} here'
    assert _run([prose], LEADING) == [Segment(Channel.TEXT, prose)]
    after_thought = "<think>hm</think>\n\n{}"
    assert _run([after_thought], LEADING)[-1] == Segment(Channel.TOOL_CALL, "{}")
