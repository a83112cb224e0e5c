"""The clients' cache hints over HTTP: Anthropic `cache_control` and OpenAI
`prompt_cache_breakpoint` mark where a reusable prefix ends, and usage says what was read from
the prompt cache and written to it.

On a model whose cache cannot be cut back (a random model with a 16-token sliding window, far
shorter than these prompts), only the positions the prefill took entries at can serve another
prompt: the system turn's end, the prompt but its last token, and now the marked blocks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.support.random_model import build_random_model
from tests.support.stack import Stack

SYSTEM = (
    "You are the keeper of a lighthouse on a rocky coast. You answer the questions of the "
    "sailors who pass by, about the weather, the tides and the stories of the sea."
)
# The part of the user's message a client marks: long past the window.
MARKED = (
    "Here is the logbook of the last voyage: we left the harbour at dawn, sailed north along "
    "the cliffs, met a storm near the islands, lost a sail, and came back two days later."
)
EPHEMERAL: Any = {"type": "ephemeral"}
TOOL: Any = {
    "name": "tide_table",
    "description": "The tides of a harbour.",
    "input_schema": {"type": "object", "properties": {"harbour": {"type": "string"}}},
}
MAX_TOKENS = 4


@pytest.fixture(scope="module")
def windowed_stack(
    tmp_path_factory: pytest.TempPathFactory, model_path: Path, store_url: str
) -> Iterator[Stack]:
    path = build_random_model(
        tmp_path_factory.mktemp("windowed-http") / "windowed",
        seed=5,
        tokenizer_from=model_path,
        sliding_window=16,
    )
    with Stack.running(model_path=path, store_url=store_url) as stack:
        yield stack


def _body(system: str, question: str, *, marked: bool) -> Any:
    mark = {"cache_control": EPHEMERAL} if marked else {}
    return {
        "max_tokens": MAX_TOKENS,
        "system": [{"type": "text", "text": system, **mark}],
        "tools": [{**TOOL, **mark}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": MARKED, **mark},
                    {"type": "text", "text": question},
                ],
            }
        ],
    }


def test_cache_control_breakpoints_serve_the_marked_prefix(windowed_stack: Stack) -> None:
    """Two requests share the system turn, the tools and the first block of the user's message
    (marked), then part. Unmarked, the second reads only the system turn (its end is the only
    entry they share); marked, it reads through the marked block: at least the prompt that
    block ends (counted alone) less the template's turn end and reply opening. Usage counts
    as Anthropic does: `cache_creation_input_tokens` is what the marks asked to write (the
    prefix through the marked block less what was read; 0 unmarked), `input_tokens` the rest
    of what was not read; the three add up to the prompt."""
    client = anthropic.Anthropic(base_url=windowed_stack.base_url, api_key="x", max_retries=0)
    model = windowed_stack.settings.models[0].name

    def count(body: Any) -> int:
        body = {k: v for k, v in body.items() if k != "max_tokens"}
        return client.messages.count_tokens(model=model, **body).input_tokens

    def send(body: Any) -> Any:
        return client.messages.create(model=model, **body).usage

    upto_marked = count(
        {
            "system": [{"type": "text", "text": SYSTEM}],
            "tools": [TOOL],
            "messages": [{"role": "user", "content": MARKED}],
        }
    )
    reads = {}
    for marked, system in ((False, SYSTEM + " Unmarked."), (True, SYSTEM)):
        first = _body(system, " Where did we lose the sail?", marked=marked)
        second = _body(system, " And what did the harbour master say?", marked=marked)
        one, two = send(first), send(second)
        for usage, body in ((one, first), (two, second)):
            prompt = count(body)
            read = usage.cache_read_input_tokens or 0
            written = usage.cache_creation_input_tokens or 0
            assert usage.input_tokens + read + written == prompt
            if marked:  # written through the marked block; the question after it is input
                assert upto_marked - 8 <= read + written <= upto_marked
                assert usage.input_tokens >= prompt - upto_marked > 0
            else:
                assert written == 0 and usage.input_tokens == prompt - read > 0
        assert one.cache_read_input_tokens == 0
        if marked:
            assert (one.cache_creation_input_tokens or 0) > 0
        reads[marked] = two.cache_read_input_tokens or 0

    # The rendering of the message alone closes its turn and opens the reply after the marked
    # text: a few tokens the second prompt does not share.
    assert upto_marked - 8 <= reads[True] <= upto_marked
    # Unmarked: the system turn only (its text 2 tokens longer than the marked run's).
    system_turn = count(
        {
            "system": SYSTEM + " Unmarked.",
            "tools": [TOOL],
            "messages": [{"role": "user", "content": ""}],
        }
    )
    assert 0 < reads[False] <= system_turn < reads[True] - 30


def test_anthropic_usage_counts_written_only_what_a_mark_asked_for(stack: Stack) -> None:
    """On a model whose cache holds the whole prompt in one entry (the bundled one, trimmable),
    Anthropic's usage still says what the client's marks asked for: unmarked, nothing is
    written and the prompt less what was read is `input_tokens` (before, all of it counted as
    `cache_creation_input_tokens` and `input_tokens` was 0); the logbook block marked, what
    was written ends where that block does, and the question after it is input."""
    client = anthropic.Anthropic(base_url=stack.base_url, api_key="x", max_retries=0)
    model = stack.settings.models[0].name

    def body(system: str, question: str, marked: bool) -> Any:
        mark = {"cache_control": EPHEMERAL} if marked else {}
        content = [{"type": "text", "text": MARKED, **mark}, {"type": "text", "text": question}]
        return {"system": system, "messages": [{"role": "user", "content": content}]}

    def count(body: Any) -> int:
        return client.messages.count_tokens(model=model, **body).input_tokens

    def send(body: Any) -> tuple[int, int, int]:
        usage = client.messages.create(model=model, max_tokens=MAX_TOKENS, **body).usage
        read = usage.cache_read_input_tokens or 0
        return usage.input_tokens, read, usage.cache_creation_input_tokens or 0

    for question in (" Where did we lose the sail?", " Who was on board?"):
        plain = body(SYSTEM + " Unmarked.", question, marked=False)
        uncached, read, written = send(plain)
        assert written == 0 and uncached == count(plain) - read > 0
    system = SYSTEM + " Marked."
    upto_marked = count({"system": system, "messages": [{"role": "user", "content": MARKED}]})
    marked = body(system, " And what did the harbour master say?", marked=True)
    uncached, read, written = send(marked)
    assert uncached + read + written == count(marked)
    assert written > 0 and upto_marked - 8 <= read + written <= upto_marked
    assert uncached >= count(marked) - upto_marked > 0


def test_prompt_cache_breakpoint_serves_the_marked_prefix(windowed_stack: Stack) -> None:
    """OpenAI's `prompt_cache_breakpoint` on an input_text part does the same on Responses:
    the second request reads through the marked part, and `cache_write_tokens` says what each
    wrote."""
    model = windowed_stack.settings.models[0].name

    def send(question: str) -> Any:
        content = [
            {"type": "input_text", "text": MARKED, "prompt_cache_breakpoint": {"mode": "explicit"}},
            {"type": "input_text", "text": question},
        ]
        body = {
            "model": model,
            "instructions": SYSTEM + " Responses.",
            "input": [{"role": "user", "content": content}],
            "max_output_tokens": MAX_TOKENS,
            "temperature": 0,
            "prompt_cache_key": "lighthouse",
            "prompt_cache_retention": "24h",
        }
        reply = httpx.post(f"{windowed_stack.base_url}/v1/responses", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        return reply.json()["usage"]

    first, second = send(" Where did we lose the sail?"), send(" Who was on board?")
    details = [u["input_tokens_details"] for u in (first, second)]
    assert details[0] == {"cached_tokens": 0, "cache_write_tokens": first["input_tokens"]}
    read = details[1]["cached_tokens"]
    assert details[1]["cache_write_tokens"] == second["input_tokens"] - read
    # Through the marked text: past the instructions and most of the marked part.
    assert read > second["input_tokens"] - 20


@pytest.mark.parametrize(
    ("where", "value", "param"),
    [
        ("system", {"type": "persistent"}, "system[0].cache_control"),
        ("system", {"type": "ephemeral", "ttl": "2h"}, "system[0].cache_control.ttl"),
        ("message", "yes", "messages[0].content[0].cache_control"),
    ],
)
def test_a_malformed_cache_control_is_a_400(
    windowed_stack: Stack, where: str, value: Any, param: str
) -> None:
    body = _body(SYSTEM, "?", marked=False)
    block = body["system"][0] if where == "system" else body["messages"][0]["content"][0]
    block["cache_control"] = value
    body["model"] = windowed_stack.settings.models[0].name
    reply = httpx.post(f"{windowed_stack.base_url}/v1/messages", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    assert reply.json()["type"] == "error"
    assert param in reply.json()["error"]["message"]


@pytest.mark.parametrize("keyed", [True, False])
def test_a_prompt_cache_key_keeps_what_its_requests_share(
    windowed_stack: Stack, keyed: bool
) -> None:
    """Three questions on one logbook, unmarked. Under one `prompt_cache_key`, the second
    request parts from the first after the logbook, and that becomes a checkpoint: the third
    reads through the logbook. Without a key (or under another key each), only the system
    turn's end serves it."""
    model = windowed_stack.settings.models[0].name
    logbook = MARKED + " " + MARKED.replace("north", "south")
    questions = (" Where did we lose the sail?", " Who was on board?", " When was the storm?")

    def send(i: int, question: str) -> Any:
        body = {
            "model": model,
            "instructions": SYSTEM + (" Keyed." if keyed else " Not keyed."),
            "input": [{"role": "user", "content": logbook + question}],
            "max_output_tokens": MAX_TOKENS,
            "temperature": 0,
            "prompt_cache_key": "logbook" if keyed else f"question-{i}",
        }
        reply = httpx.post(f"{windowed_stack.base_url}/v1/responses", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        return reply.json()["usage"]

    usage = [send(i, q) for i, q in enumerate(questions)]
    third = usage[2]
    read = third["input_tokens_details"]["cached_tokens"]
    if keyed:
        # Through the logbook: all but the question and the template's turn end.
        assert read > third["input_tokens"] - 20
    else:
        assert 0 < read < third["input_tokens"] - 60  # the system turn only
