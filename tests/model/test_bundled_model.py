"""The bundled tiny-chat model loads with mlx_lm and really echoes, calls tools and thinks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlx_responses.service.engine.sliding_window import apply_window, declared_window

from training.tiny_chat.data import UNKNOWN_WORDS, unknown_word_prompts
from training.tiny_chat.evaluate import BEHAVIOURS, Outcome, accuracy, evaluate
from training.tiny_chat.lexicon import unique_words

MODEL_DIR = Path(__file__).resolve().parents[2] / "service" / "assets" / "tiny-chat"
N_PROMPTS = 200
# The target is 0.95 for every behaviour and each of its parts. The committed weights
# (`make model`: the base recipe, then the agent stage; PILOTS.md) measure echo 0.965, tool 0.980
# (tool_call 0.96, tool_result 1.00), think 0.995 (enable_thinking 0.99, think_request 1.00) and
# copy 0.975 (words outside the lexicon: English 0.98, random strings 0.97) on these held-out
# prompts, greedy. The floors sit a point or so under those figures (echo: at the target) so a
# regression fails.
TARGET = 0.95
FLOORS = {"echo": 0.95, "tool": 0.97, "think": 0.975, "copy": 0.97}


@pytest.fixture(scope="module")
def loaded() -> tuple[Any, Any]:
    from mlx_lm import load

    return load(str(MODEL_DIR))


@pytest.fixture(scope="module")
def results(loaded: tuple[Any, Any]) -> dict[str, list[Outcome]]:
    model, tokenizer = loaded
    return evaluate(model, tokenizer, n=N_PROMPTS)


def test_folder_layout() -> None:
    config = json.loads((MODEL_DIR / "config.json").read_text())
    tok_config = json.loads((MODEL_DIR / "tokenizer_config.json").read_text())
    assert config["model_type"] == "qwen3"
    assert config["tie_word_embeddings"] is True
    assert tok_config["eos_token"] == "<|im_end|>"
    assert tok_config["pad_token"] == "<|endoftext|>"
    assert (MODEL_DIR / "model.safetensors").stat().st_size < 16 * 2**20
    # A 64k context (Claude Code's default request is 44k tokens), every layer attending over
    # the last 2,048 tokens (the rows it trained on), so no distance is one it never saw.
    assert config["max_position_embeddings"] == 65536
    assert declared_window(config) == 2048


def test_tokenizer_and_template(loaded: tuple[Any, Any]) -> None:
    _, tokenizer = loaded
    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") == config["eos_token_id"]
    assert tokenizer.eos_token_ids == {config["eos_token_id"]}
    for token in (
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
    ):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    text = "<think>\nx\n</think>\n\n<tool_call>\n{}\n</tool_call>"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert tokenizer.has_thinking and tokenizer.think_start == "<think>"
    assert tokenizer.has_tool_calling and tokenizer.tool_call_start == "<tool_call>"
    messages = [{"role": "user", "content": "Reply with: hello"}]
    plain = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert plain == "<|im_start|>user\nReply with: hello<|im_end|>\n<|im_start|>assistant\n"
    thinking = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, enable_thinking=True
    )
    assert thinking == plain + "<think>\n"


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_behaviour_on_held_out_prompts(results: dict[str, list[Outcome]], behaviour: str) -> None:
    outcomes = results[behaviour]
    assert len(outcomes) == (len(unknown_word_prompts()) if behaviour == "copy" else N_PROMPTS)
    failures = [o for o in outcomes if not o.ok][:5]
    detail = "\n".join(
        f"[{o.prompt.variant}] expected {o.prompt.expected!r} got {o.output!r}" for o in failures
    )
    assert accuracy(outcomes) >= FLOORS[behaviour], (
        f"{behaviour}: {accuracy(outcomes):.3f}\n{detail}"
    )


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_every_part_reaches_the_target(results: dict[str, list[Outcome]], behaviour: str) -> None:
    """tool_call and tool_result, enable_thinking and think_request, English and random words."""
    parts: dict[str, list[Outcome]] = {}
    for outcome in results[behaviour]:
        parts.setdefault(outcome.prompt.variant, []).append(outcome)
    scores = {variant: accuracy(outcomes) for variant, outcomes in parts.items()}
    assert min(scores.values()) >= TARGET, scores


def test_the_exact_quick_start_prompt(loaded: tuple[Any, Any]) -> None:
    from mlx_lm import generate

    model, tokenizer = loaded
    messages = [{"role": "user", "content": "Reply with: hello"}]
    prompt = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert generate(model, tokenizer, prompt, max_tokens=8) == "hello"


def test_the_quick_start_prompt_behind_a_codex_length_preamble() -> None:
    """~18k tokens of Codex's own instructions first (held out from training), then the prompt:
    the window the config declares keeps every distance one the model was trained across."""
    from mlx_lm import generate, load

    from training.tiny_chat.long_context import preamble

    model, tokenizer = load(str(MODEL_DIR))
    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert apply_window(model, config, MODEL_DIR.name) == 2048
    messages = [
        {"role": "system", "content": preamble(tokenizer, 18_432)},
        {"role": "user", "content": "Reply with: hello"},
    ]
    prompt = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert len(tokenizer.encode(prompt)) > 18_000
    assert generate(model, tokenizer, prompt, max_tokens=8) == "hello"


def test_unknown_words_are_spelled_in_pieces(loaded: tuple[Any, Any]) -> None:
    """The copy eval's words are outside the lexicon, and tokenize the same in prompt and answer."""
    _, tokenizer = loaded
    lexicon = set(unique_words())
    for word in UNKNOWN_WORDS:
        assert word not in lexicon and len(word) <= 12 and word.isascii() and word.islower()
    for prompt in unknown_word_prompts():
        word = prompt.expected
        bare = tokenizer.encode(word, add_special_tokens=False)
        in_prompt = tokenizer.encode("Reply with: " + word, add_special_tokens=False)
        assert in_prompt[-len(bare) :] == bare, word
