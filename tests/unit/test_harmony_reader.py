"""The harmony reader on token fixtures: every malformed variant reads as its well-formed twin.

Fixtures are harmony text encoded by the tiny gpt-oss tokenizer (training/tiny_harmony), whose
control-token ids are not gpt-oss's: the reader finds them in the tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.text.harmony import (
    HarmonyFormat,
    HarmonyTokens,
    harmony_format,
    harmony_messages,
)
from mlx_responses.service.text.harmony_reader import HarmonyReader
from mlx_responses.service.text.output_parser import Channel, Segment
from mlx_responses.service.text.tool_formats import detect_format

from training.tiny_harmony.tokenizer import write_tokenizer

ANALYSIS = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
ARGS = '{"location":"Paris"}'
CALL = f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{ARGS}<|call|>"
# Each variant, after the analysis message, as models write it.
VARIANTS = {
    "recipient in the role part": (
        f" to=functions.get_weather<|channel|>commentary json<|message|>{ARGS}<|call|>"
    ),
    "no constrain": f"<|channel|>commentary to=functions.get_weather json<|message|>{ARGS}<|call|>",
    "content type code": (
        f"<|channel|>commentary to=functions.get_weather code<|message|>{ARGS}<|call|>"
    ),
    "recipient on analysis": (
        f"<|channel|>analysis to=functions.get_weather code<|message|>{ARGS}<|call|>"
    ),
    "stop token not handed over": (
        f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{ARGS}"
    ),
    "constrain as the recipient's neighbour": (
        f"<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{ARGS}<|call|>"
    ),
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("harmony-tokenizer")
    write_tokenizer(BUNDLED_MODEL, folder)
    return AutoTokenizer.from_pretrained(str(folder))


def ids(tokenizer: Any, text: str, *, plain: str = "") -> list[int]:
    """`text`'s ids, its control tokens as such; `plain` appended with them spelled as text."""
    out = list(tokenizer.encode(text, add_special_tokens=False))
    if plain:
        out += tokenizer.encode(plain, add_special_tokens=False, split_special_tokens=True)
    return out


def read(
    tokenizer: Any, tokens: list[int], functions: tuple[str, ...] = ("get_weather",), step: int = 1
) -> list[Segment]:
    """Segments of `tokens` fed `step` at a time, adjacent ones of a channel merged."""
    reader = HarmonyReader(HarmonyTokens.of(tokenizer), tokenizer, functions)  # type: ignore[arg-type]
    out: list[Segment] = []
    for i in range(0, len(tokens), step):
        out += reader.feed(tokens[i : i + step])
    out += reader.finish()
    merged: list[Segment] = []
    for s in out:
        if merged and s.channel is merged[-1].channel and s.channel is not Channel.BOUNDARY:
            merged[-1] = Segment(s.channel, merged[-1].text + s.text)
        else:
            merged.append(s)
    return merged


def test_ids_are_read_from_the_tokenizer(tokenizer: Any) -> None:
    tokens = HarmonyTokens.of(tokenizer)
    assert tokens is not None
    assert tokenizer.convert_ids_to_tokens([tokens.start, tokens.call]) == ["<|start|>", "<|call|>"]
    assert tokens.start != 200006  # not gpt-oss's table
    fmt = harmony_format(tokenizer)
    assert isinstance(fmt, HarmonyFormat) and fmt.kind == "harmony"


def test_a_final_answer(tokenizer: Any) -> None:
    text = ANALYSIS.replace("Need weather.", "Simple.") + "<|channel|>final<|message|>4<|return|>"
    assert read(tokenizer, ids(tokenizer, text)) == [
        Segment(Channel.REASONING, "Simple."),
        Segment(Channel.BOUNDARY, ""),
        Segment(Channel.TEXT, "4"),
        Segment(Channel.BOUNDARY, ""),
    ]
    # Cut short, the last message is left for the response's end to close.
    assert read(tokenizer, ids(tokenizer, text)[:-1])[-1] == Segment(Channel.TEXT, "4")


@pytest.mark.parametrize("variant", ["well formed", *VARIANTS])
def test_a_call_and_its_variants(tokenizer: Any, variant: str) -> None:
    tail = CALL if variant == "well formed" else VARIANTS[variant]
    segments = read(tokenizer, ids(tokenizer, ANALYSIS + tail))
    assert segments == [
        Segment(Channel.REASONING, "Need weather."),
        Segment(Channel.BOUNDARY, ""),
        Segment(Channel.TOOL_CALL, HarmonyFormat.span("get_weather", ARGS)),
    ]


def test_a_name_with_protocol_text_glued_on(tokenizer: Any) -> None:
    """vLLM #32587: `<|channel|>commentary` written as text after the name is not the name."""
    tokens = ids(tokenizer, ANALYSIS + " to=functions.get_weather", plain="<|channel|>commentary")
    tokens += ids(tokenizer, f" json<|message|>{ARGS}<|call|>")
    assert read(tokenizer, tokens)[-1] == Segment(
        Channel.TOOL_CALL, HarmonyFormat.span("get_weather", ARGS)
    )


def test_a_preamble_is_a_message_of_its_own(tokenizer: Any) -> None:
    text = "<|channel|>commentary<|message|>Checking the weather.<|end|><|start|>assistant" + CALL
    assert read(tokenizer, ids(tokenizer, text)) == [
        Segment(Channel.TEXT, "Checking the weather."),
        Segment(Channel.BOUNDARY, ""),
        Segment(Channel.TOOL_CALL, HarmonyFormat.span("get_weather", ARGS)),
    ]


@pytest.mark.parametrize(
    "recipient", ["browser.search", "python", "functions.undeclared", "get_weather"]
)
def test_recipients_not_offered_never_call_nor_leak(tokenizer: Any, recipient: str) -> None:
    text = (
        f"<|channel|>analysis to={recipient} code<|message|>print(1)<|call|>"
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    )
    segments = read(tokenizer, ids(tokenizer, text))
    assert segments == [Segment(Channel.TEXT, "Done."), Segment(Channel.BOUNDARY, "")]


def test_a_function_named_python_is_a_call(tokenizer: Any) -> None:
    text = (
        '<|channel|>commentary to=functions.python <|constrain|>json<|message|>{"code":"1"}<|call|>'
    )
    assert read(tokenizer, ids(tokenizer, text), ("python",)) == [
        Segment(Channel.TOOL_CALL, HarmonyFormat.span("python", '{"code":"1"}'))
    ]
    plain = '<|channel|>analysis to=python code<|message|>{"code":"1"}<|call|>'
    assert read(tokenizer, ids(tokenizer, plain), ("python",)) == []


def test_text_spelling_control_tokens_stays_text(tokenizer: Any) -> None:
    """Control tokens are told by id: their spelling in text is text."""
    tokens = ids(tokenizer, "<|channel|>final<|message|>", plain="a <|end|> b")
    tokens += ids(tokenizer, "<|return|>")
    assert read(tokenizer, tokens)[0] == Segment(Channel.TEXT, "a <|end|> b")


def test_token_by_token_equals_all_at_once(tokenizer: Any) -> None:
    text = ANALYSIS + "<|channel|>final<|message|>Il fait 20°C à Paris ✓<|return|>"
    tokens = ids(tokenizer, text)
    assert read(tokenizer, tokens, step=1) == read(tokenizer, tokens, step=len(tokens))
    assert read(tokenizer, tokens)[2] == Segment(Channel.TEXT, "Il fait 20°C à Paris ✓")


def test_a_cut_call_streams_its_arguments(tokenizer: Any) -> None:
    reader = HarmonyReader(HarmonyTokens.of(tokenizer), tokenizer, ("get_weather",))  # type: ignore[arg-type]
    reader.feed(ids(tokenizer, CALL)[:-3])
    assert reader.channel is Channel.TOOL_CALL
    name, _, arguments = reader.partial_tool_body.partition("\n")
    assert name == "get_weather" and ARGS.startswith(arguments) and arguments


def test_format_reads_the_span() -> None:
    fmt = HarmonyFormat(HarmonyTokens(1, 2, 3, 4, 6, 7, 5))
    assert fmt.parse(HarmonyFormat.span("f", ARGS), {})[0].arguments == ARGS
    assert fmt.partial(HarmonyFormat.span("f", '{"a'), {})[0].arguments == '{"a'


def test_other_templates_keep_their_format(tokenizer: Any) -> None:
    assert harmony_format(object()) is None
    assert detect_format  # the seed formats stay detect_format's (tests/unit/test_tool_formats.py)


def test_harmony_rule_for_past_reasoning() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {}}}
    loop = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "r1", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "20C"},
    ]
    kept = harmony_messages(loop)
    assert kept[1]["thinking"] == "r1" and "reasoning_content" not in kept[1]
    done = [
        *loop,
        {"role": "assistant", "content": "It is 20C.", "reasoning_content": "r2"},
        {"role": "user", "content": "and now?"},
    ]
    dropped = harmony_messages(done)
    assert not any("thinking" in m or "reasoning_content" in m for m in dropped)
    preamble = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Checking.", "reasoning_content": "r1"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    marked = harmony_messages(preamble)
    assert marked[1] | {} == {
        "role": "assistant",
        "content": "Checking.",
        "thinking": "r1",
        "channel": "commentary",
    }
    assert json.dumps(marked)  # plain data for the template


def test_tokenizer_folder(tmp_path: Path) -> None:
    table = write_tokenizer(BUNDLED_MODEL, tmp_path)
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    # Only <|return|> and <|endoftext|>, as early gpt-oss conversions: the server adds <|call|>.
    assert table["<|call|>"] not in generation["eos_token_id"]
