"""A hybrid model's prompt cache over HTTP: a Qwen3.5-shaped model (recurrent gated-delta state
beside attention, which cannot be cut back), a system prompt of over 2,000 tokens. The server
takes checkpoints of the whole cache where the system turn ends, where the generation prompt
begins and where the prompt is in, so a chained turn and a tool loop's next request read them
(tests/engine/test_prompt_checkpoints.py proves the tokens equal cold)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mlx_responses.service.engine.model import load_model

from tests.engine.test_prompt_checkpoints import SYSTEM
from tests.support.shaped_models import build_shaped
from tests.support.stack import Stack

TOOL: Any = {
    "type": "function",
    "name": "tide",
    "description": "The tide at a harbour.",
    "parameters": {"type": "object", "properties": {"harbour": {"type": "string"}}},
}
THINKING = {"enable_thinking": True}  # the generation prompt ends `<think>\n`, as Qwen3.5's


@pytest.fixture(scope="module")
def hybrid_stack(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Stack]:
    path = build_shaped("qwen3_5", tmp_path_factory.mktemp("hybrid-http") / "qwen3_5")
    # A checkpoint every 1,024 tokens too (the flag's way to the engine).
    with Stack.running(model_path=path, store_url=store_url, prompt_checkpoint_tokens=1024) as s:
        yield s


def _send(stack: Stack, **body: Any) -> Any:
    body = {
        "model": stack.settings.models[0].name,
        "instructions": SYSTEM,
        "max_output_tokens": 6,
        "temperature": 0,
        **body,
    }
    reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] in ("completed", "incomplete"), reply.text
    return reply.json()


def _read(response: Any) -> int:
    return int(response["usage"]["input_tokens_details"]["cached_tokens"])


def _tokens(stack: Stack, text: str) -> int:
    tokenizer = load_model(stack.settings.models[0]).tokenizer
    return len(tokenizer.encode(text, add_special_tokens=False))


def test_a_chained_turn_and_a_new_conversation_read_the_checkpoints(hybrid_stack: Stack) -> None:
    # The template's generation prompt, thinking on.
    generation_prompt = _tokens(hybrid_stack, "<|im_start|>assistant\n<think>\n")
    first = _send(hybrid_stack, input="Where is the harbour?", chat_template_kwargs=THINKING)
    assert first["usage"]["input_tokens"] > 2000 and _read(first) == 0
    second = _send(
        hybrid_stack,
        input="And the boats?",
        previous_response_id=first["id"],
        chat_template_kwargs=THINKING,
    )
    assert _read(second) >= first["usage"]["input_tokens"] - generation_prompt
    # A client that sends the reply back as text, its reasoning dropped: the next prompt parts
    # from the last one in its generation prompt, read from where that began.
    question = {"role": "user", "content": "Where is the harbour?"}
    replied = [question, {"role": "assistant", "content": "North."}]
    resent = _send(
        hybrid_stack,
        input=[*replied, {"role": "user", "content": "And the boats?"}],
        chat_template_kwargs=THINKING,
    )
    assert _read(resent) == first["usage"]["input_tokens"] - generation_prompt
    other = _send(hybrid_stack, input="Who bakes the bread?", chat_template_kwargs=THINKING)
    assert len(SYSTEM) // 10 < _read(other) < other["usage"]["input_tokens"] - 5
    # --prompt-checkpoint-tokens reaches the engine.
    worker = hybrid_stack.core.models.default.runtime.worker  # type: ignore[union-attr]
    assert worker.checkpoint_interval == 1024


def test_a_tool_loop_reads_the_whole_previous_prompt(hybrid_stack: Stack) -> None:
    """The client sends the call and its output back: the next prompt extends the last one,
    which the checkpoint taken once it was in serves whole."""
    question = {"role": "user", "content": "What is the tide at the north harbour?"}
    first = _send(hybrid_stack, input=[question], tools=[TOOL])
    call = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "tide",
        "arguments": '{"harbour": "north"}',
    }
    output = {"type": "function_call_output", "call_id": "call_1", "output": '{"tide": "high"}'}
    looped = _send(hybrid_stack, input=[question, call, output], tools=[TOOL])
    assert _read(looped) >= first["usage"]["input_tokens"]
