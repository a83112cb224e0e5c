"""Compaction over HTTP (raw and the openai SDK): the compact endpoint, replay, automatic
compaction (`context_management`), on the bundled model (its context declared as 2,048 tokens)
and on a small-context random model."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from mlx_responses.service.engine.requests import QueueFullError

from tests.support.random_model import build_random_model
from tests.support.stack import Stack
from tests.support.waits import until

WORDS = ["rain", "snow", "wind", "sun", "cloud", "storm", "moon", "star", "tree", "river", "bird"]
SMALL_CONTEXT = 384


@pytest.fixture(scope="module")
def small_stack(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Iterator[Stack]:
    """A random-weight model with a 384-token context window (max_position_embeddings)."""
    model = build_random_model(
        tmp_path_factory.mktemp("small") / "small-chat",
        context=SMALL_CONTEXT,
        seed=5,
        tokenizer_from=model_path,
    )
    with Stack.running(model_path=model) as s:
        yield s


@pytest.fixture(params=["bundled", "small"])
def any_stack(request: pytest.FixtureRequest) -> Stack:
    """Each test on the bundled model and on the small-context random model."""
    return request.getfixturevalue("stack" if request.param == "bundled" else "small_stack")


@pytest.fixture(scope="module")
def stack(short_context_stack: Stack) -> Stack:
    """The bundled model with a 2,048-token context (compaction's default keep is 1/16 of it)."""
    return short_context_stack


def name(stack: Stack) -> str:
    return stack.settings.models[0].name


def history(turns: int = 11, *, tools: bool = False) -> list[dict[str, Any]]:
    """A system and a developer message, `turns` echo turns (one with a tool group), a question."""
    items: list[dict[str, Any]] = [
        {"role": "system", "content": "You are tiny."},
        {"role": "developer", "content": "Answer with one word."},
    ]
    for i, word in enumerate(WORDS[:turns]):
        items.append({"role": "user", "content": f"Reply with: {word}"})
        if tools and i == turns - 1:
            items.append(
                {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{}"}
            )
            items.append({"type": "function_call_output", "call_id": "call_1", "output": word})
        items.append({"role": "assistant", "content": word})
    items.append({"role": "user", "content": "Reply with: hello"})
    return items


def post(stack: Stack, path: str, **body: Any) -> httpx.Response:
    body.setdefault("model", name(stack))
    return httpx.post(f"{stack.base_url}{path}", json=body, timeout=120)


def count(stack: Stack, **body: Any) -> int:
    reply = post(stack, "/v1/responses/input_tokens", **body)
    assert reply.status_code == 200, reply.text
    return int(reply.json()["input_tokens"])


def error(reply: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    body = reply.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    return body


def decode(content: str) -> dict[str, Any]:
    payload = json.loads(base64.urlsafe_b64decode(content + "=" * (-len(content) % 4)))
    assert isinstance(payload, dict)
    return payload


def text_of(item: dict[str, Any]) -> str:
    """A message's text, a call's arguments or a call output's output."""
    if "content" not in item:
        return str(item.get("output", item.get("arguments", "")))
    if isinstance(item["content"], str):
        return item["content"]
    return "".join(part.get("text", "") for part in item["content"])


def fill(stack: Stack, build: Any, target: int) -> list[dict[str, Any]]:
    """build(n) padded with the fewest words that bring the rendered input to `target`."""
    words = max(0, target - count(stack, input=build(0)) - 8)
    while count(stack, input=build(words)) < target:
        words += 1
    return list(build(words))


def rains(words: int) -> str:
    return "Reply with: " + " ".join(["rain"] * words)


def cm(threshold: int) -> list[dict[str, Any]]:
    return [{"type": "compaction", "compact_threshold": threshold}]


def test_models_expose_the_context_window(stack: Stack, small_stack: Stack) -> None:
    bundled = json.loads((stack.settings.models[0] / "config.json").read_text())
    for some, window in (
        (stack, bundled["max_position_embeddings"]),
        (small_stack, SMALL_CONTEXT),
    ):
        models = httpx.get(f"{some.base_url}/v1/models").json()["data"]
        assert [m["context_length"] for m in models] == [window]
        assert (
            some.core is not None
            and some.core.models.default.runtime.loaded.context_length == window
        )


# --- POST /v1/responses/compact ---------------------------------------------------------------
def test_compact_output_usage_and_nothing_stored(any_stack: Stack) -> None:
    stack = any_stack
    items = history(tools=True)
    reply = post(
        stack,
        "/v1/responses/compact",
        input=items,
        keep_tokens=40,
        max_output_tokens=12,
        temperature=0,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert set(body) == {"id", "object", "created_at", "model", "output", "usage"}
    assert body["object"] == "response.compaction" and body["id"].startswith("cmp_")
    assert body["model"] == name(stack) and abs(body["created_at"] - time.time()) < 60
    output = body["output"]
    # The kept system and developer messages first, then the retained items, then one compaction.
    assert [(o["role"], text_of(o)) for o in output[:2]] == [
        ("system", "You are tiny."),
        ("developer", "Answer with one word."),
    ]
    assert [o["type"] for o in output].count("compaction") == 1
    assert output[-1]["type"] == "compaction" and output[-1]["id"].startswith("cmp_")
    retained = output[2:-1]
    assert retained[-1]["role"] == "user" and text_of(retained[-1]) == "Reply with: hello"
    # The retained part is the newest items of the history, verbatim, and fits keep_tokens.
    assert count(stack, input=retained) <= 40 or len(retained) == 1
    start = len(items) - len(retained)
    assert [text_of(o) for o in retained] == [text_of(i) for i in items[start:]]
    # It starts at a user turn or right after a completed tool group.
    assert items[start].get("role") == "user" or items[start - 1]["type"] == "function_call_output"
    # encrypted_content: base64url JSON holding the summary and the retained items.
    payload = decode(output[-1]["encrypted_content"])
    assert isinstance(payload["summary"], str) and len(payload["items"]) == len(retained)
    # The usage counts the summary generation.
    usage = body["usage"]
    assert usage["input_tokens"] > 0 and 1 <= usage["output_tokens"] <= 12
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    # Nothing is stored.
    for some_id in (body["id"], output[-1]["id"]):
        error(httpx.get(f"{stack.base_url}/v1/responses/{some_id}"), 404)
    # The bare alias is the same endpoint.
    bare = post(stack, "/responses/compact", input=items, keep_tokens=40, max_output_tokens=12)
    assert bare.status_code == 200 and bare.json()["object"] == "response.compaction"


def test_split_never_separates_a_call_from_its_output(stack: Stack) -> None:
    items = history(tools=True)
    for keep in (10, 30, 60, 90, 120):
        body = post(stack, "/v1/responses/compact", input=items, keep_tokens=keep).json()
        retained = body["output"][2:-1]
        call_ids = [o["call_id"] for o in retained if o["type"] == "function_call"]
        output_ids = [o["call_id"] for o in retained if o["type"] == "function_call_output"]
        assert call_ids == output_ids


def test_default_keep_tokens_is_a_sixteenth_of_the_context(small_stack: Stack) -> None:
    # 384 / 16 = 24 tokens.
    body = post(small_stack, "/v1/responses/compact", input=history(), max_output_tokens=4).json()
    retained = body["output"][2:-1]
    assert count(small_stack, input=retained) <= SMALL_CONTEXT // 16
    wider = post(
        small_stack, "/v1/responses/compact", input=history(), keep_tokens=80, max_output_tokens=4
    ).json()
    assert len(wider["output"]) > len(body["output"])


def test_compact_with_the_sdk_and_replay(any_stack: Stack) -> None:
    stack = any_stack
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    compacted = client.responses.compact(
        model=name(stack),
        input=history(),  # type: ignore[arg-type]
        extra_body={"keep_tokens": 40, "max_output_tokens": 8, "temperature": 0},
    )
    assert compacted.object == "response.compaction"
    assert compacted.output[-1].type == "compaction"
    # The SDK types output messages as the assistant's: retained user messages dump loosely.
    replay = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    answer = client.responses.create(
        model=name(stack),
        input=[*replay, {"role": "user", "content": "Reply with: moon"}],  # type: ignore[list-item]
        max_output_tokens=8,
        temperature=0,
    )
    assert answer.status in ("completed", "incomplete") and answer.output_text
    if stack.settings.models[0].name == "tiny-chat":
        assert answer.output_text == "moon"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"stream": True}, "stream"),
        ({"previous_response_id": "resp_x"}, "previous_response_id"),
        ({"conversation": "conv_x"}, "conversation"),
        ({"keep_tokens": 0}, "keep_tokens"),
        ({"keep_tokens": -3}, "keep_tokens"),
        ({"keep_tokens": "10"}, "keep_tokens"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_output_tokens": 16385}, "max_output_tokens"),
        ({"model": None}, "model"),
    ],
)
def test_compact_refusals(stack: Stack, fields: dict[str, Any], param: str) -> None:
    body = {"model": name(stack), "input": history(), **fields}
    if body["model"] is None:
        del body["model"]
    reply = httpx.post(f"{stack.base_url}/v1/responses/compact", json=body, timeout=60)
    assert error(reply)["param"] == param


def test_compact_refuses_what_cannot_shorten_or_fit(small_stack: Stack, stack: Stack) -> None:
    # A history longer than one context window.
    long = [*history(), {"role": "user", "content": " ".join(WORDS * 20)}]
    assert count(small_stack, input=long) > SMALL_CONTEXT
    refused = error(post(small_stack, "/v1/responses/compact", input=long))
    assert refused["code"] == "context_length_exceeded" and "context window" in refused["message"]
    # Nothing older than the retained part: no summary can shorten it.
    short = [{"role": "user", "content": "Reply with: hi"}]
    refused = error(post(stack, "/v1/responses/compact", input=short))
    assert refused["code"] == "context_length_exceeded"
    # Older items shorter than the summary's own header cannot be shortened either.
    tiny = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Reply with: hi"}]
    refused = error(post(stack, "/v1/responses/compact", input=tiny, keep_tokens=1))
    assert refused["code"] == "context_length_exceeded" and "shorten" in refused["message"]

    # Older turns that, with the request for a summary, fill the whole window.
    def crowded(words: int) -> list[dict[str, Any]]:
        older = [{"role": "user", "content": rains(words)}, {"role": "assistant", "content": "x"}]
        return [*history()[:-1], *older, history()[-1]]

    big = fill(small_stack, crowded, SMALL_CONTEXT - 4)
    refused = error(post(small_stack, "/v1/responses/compact", input=big, keep_tokens=1))
    assert refused["code"] == "context_length_exceeded" and "does not fit" in refused["message"]


# --- replaying a compaction item ----------------------------------------------------------------
def test_compaction_item_replays_in_responses_and_input_tokens(stack: Stack) -> None:
    items = history()
    output = post(stack, "/v1/responses/compact", input=items, keep_tokens=30).json()["output"]
    question = {"role": "user", "content": "Reply with: moon"}
    full = count(stack, input=[*items, question])
    compacted = count(stack, input=[*output, question])
    assert compacted < full
    # The compaction item stands in for the earlier turns: the verbatim copies of the retained
    # items before it are not rendered twice, and the item alone carries them.
    assert count(stack, input=[*output[:2], output[-1], question]) == compacted
    created = post(stack, "/v1/responses", input=[*output, question], max_output_tokens=8).json()
    assert created["usage"]["input_tokens"] == compacted
    assert text_of(created["output"][0]) == "moon"
    # A previous_response_id chain replays it too.
    chained = post(
        stack, "/v1/responses", input="Reply with: star", previous_response_id=created["id"]
    ).json()
    assert text_of(chained["output"][0]) == "star"
    uncompacted = post(stack, "/v1/responses", input=[*items, question]).json()
    assert (
        count(stack, input="Reply with: star", previous_response_id=created["id"])
        == chained["usage"]["input_tokens"]
        < count(stack, input="Reply with: star", previous_response_id=uncompacted["id"])
    )


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens"])
def test_bad_encrypted_content_is_a_400(stack: Stack, path: str) -> None:
    for content in ("!!not-base64!!", base64.urlsafe_b64encode(b'{"items": []}').decode()):
        bad = [{"type": "compaction", "encrypted_content": content}, *history(1)]
        refused = error(post(stack, path, input=bad))
        assert refused["param"] == "input" and refused["code"] == "invalid_compaction"


# --- context_management: automatic compaction ---------------------------------------------------
def test_auto_compaction_output_store_and_next_hop(any_stack: Stack) -> None:
    stack = any_stack
    items = history()
    before = count(stack, input=items)
    reply = post(
        stack,
        "/v1/responses",
        input=items,
        context_management=cm(100),
        temperature=0,
        max_output_tokens=8,
    )
    assert reply.status_code == 200, reply.text
    first = reply.json()
    assert [o["type"] for o in first["output"][:2]] == ["compaction", "message"]
    assert first["usage"]["input_tokens"] < before
    payload = decode(first["output"][0]["encrypted_content"])
    assert payload["items"][-1]["message"]["content"][0]["inputText"]["text"] == "Reply with: hello"
    stored = httpx.get(f"{stack.base_url}/v1/responses/{first['id']}").json()
    assert stored["output"] == first["output"]
    # The next hop replays the summary: counted like input_tokens, below the threshold it does
    # not compact again.
    hop = {"input": "Reply with: moon", "previous_response_id": first["id"]}
    again = count(stack, **hop)
    threshold = again + 1
    second = post(
        stack, "/v1/responses", **hop, context_management=cm(threshold), max_output_tokens=8
    ).json()
    assert second["output"][0]["type"] == "message"
    answer = {"role": "assistant", "content": first["output"][1]["content"][0]["text"]}
    uncompacted = count(
        stack, input=[*items, answer, {"role": "user", "content": "Reply with: moon"}]
    )
    assert second["usage"]["input_tokens"] == again < uncompacted
    # At the threshold it does.
    # Greedy, as the first hop: a sampled summary of the random model may not shorten it.
    third_reply = post(stack, "/v1/responses", **hop, context_management=cm(again), temperature=0)
    assert third_reply.status_code == 200, third_reply.text
    third = third_reply.json()
    assert third["output"][0]["type"] == "compaction"


def test_auto_compaction_streams_its_events(any_stack: Stack) -> None:
    stack = any_stack
    items = history()
    before = count(stack, input=items)
    body = {
        "model": name(stack),
        "input": items,
        "stream": True,
        "max_output_tokens": 16,
        "temperature": 0,
        "context_management": cm(before),
    }
    events = []
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=120) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    types = [e["type"] for e in events]
    assert types[:7] == [
        "response.created",
        "response.in_progress",
        "mlx.compaction.started",
        "mlx.compaction.completed",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    started, completed, added, done, message = events[2:7]
    assert started == {
        "type": "mlx.compaction.started",
        "sequence_number": 2,
        "response_id": final["id"],
        "input_tokens": before,
    }
    assert completed["response_id"] == final["id"]
    assert completed["input_tokens_before"] == before
    assert completed["input_tokens_after"] == final["usage"]["input_tokens"] < before
    assert added["output_index"] == done["output_index"] == 0
    assert added["item"]["type"] == done["item"]["type"] == "compaction"
    assert message["output_index"] == 1
    assert final["output"][0] == done["item"]


def test_auto_compaction_with_the_sdk(stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)
    kwargs: dict[str, Any] = {
        "model": name(stack),
        "input": history(),
        "context_management": cm(100),
        "max_output_tokens": 8,
    }
    response = client.responses.create(**kwargs)
    assert response.output[0].type == "compaction" and response.output_text == "hello"
    with client.responses.stream(**kwargs) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert types[2:4] == ["mlx.compaction.started", "mlx.compaction.completed"]
    assert final.output[0].type == "compaction" and final.output_text == "hello"


def test_auto_compaction_failure_is_an_http_error(stack: Stack) -> None:
    short = {"input": "Reply with: hi", "context_management": cm(1)}
    for stream in (False, True):
        reply = post(stack, "/v1/responses", **short, stream=stream)
        assert error(reply)["code"] == "context_length_exceeded"
        assert reply.headers["content-type"].startswith("application/json")


def _poll(stack: Stack, rid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = httpx.get(f"{stack.base_url}/v1/responses/{rid}", timeout=30).json()
        if body["status"] not in ("queued", "in_progress"):
            return body
        time.sleep(0.02)
    raise AssertionError("job never finished")


def test_auto_compaction_inside_a_background_job(stack: Stack) -> None:
    queued = post(stack, "/v1/responses", input=history(), context_management=cm(100),
                  background=True, max_output_tokens=8)  # fmt: skip
    assert queued.status_code == 200 and queued.json()["status"] == "queued"
    final = _poll(stack, queued.json()["id"])
    assert final["status"] == "completed"
    assert [o["type"] for o in final["output"]] == ["compaction", "message"]
    # A compaction failure fails the job instead of the create call.
    refused = post(stack, "/v1/responses", input="Reply with: hi", context_management=cm(1),
                   background=True)  # fmt: skip
    assert refused.status_code == 200
    failed = _poll(stack, refused.json()["id"])
    assert failed["status"] == "failed" and failed["error"]["code"] == "invalid_prompt"
    assert failed["output"] == []


def test_generation_is_capped_at_the_context_left(small_stack: Stack) -> None:
    reply = post(
        small_stack,
        "/v1/responses",
        input="Reply with: go",
        context_management=cm(100_000_000),
        max_output_tokens=5000,
        temperature=0,
    ).json()
    assert reply["status"] == "incomplete"
    assert reply["incomplete_details"] == {"reason": "max_output_tokens"}
    usage = reply["usage"]
    assert usage["input_tokens"] + usage["output_tokens"] == SMALL_CONTEXT


def test_no_room_for_output_compacts(small_stack: Stack) -> None:
    # Pad the question until the rendered input is exactly the whole window.
    def padded(words: int) -> list[dict[str, Any]]:
        return [*history(6)[:-1], {"role": "user", "content": rains(words)}]

    full = fill(small_stack, padded, SMALL_CONTEXT)
    assert count(small_stack, input=full) == SMALL_CONTEXT
    refused = error(post(small_stack, "/v1/responses", input=full))
    assert refused["code"] == "context_length_exceeded"
    reply = post(
        small_stack,
        "/v1/responses",
        input=full,
        context_management=cm(100_000_000),
        temperature=0,
        max_output_tokens=8,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["output"][0]["type"] == "compaction"
    assert body["usage"]["input_tokens"] < SMALL_CONTEXT


def test_a_chain_compacts_replays_and_keeps_answering(any_stack: Stack) -> None:
    stack = any_stack
    threshold = 180
    previous: str | None = None
    compacted = []
    for word in ["hello", *WORDS[:7]]:
        body: dict[str, Any] = {
            "input": history() if previous is None else f"Reply with: {word}",
            "context_management": cm(threshold),
            "max_output_tokens": 8,
            "temperature": 0,
        }
        if previous is not None:
            body["previous_response_id"] = previous
            expected = count(stack, input=body["input"], previous_response_id=previous)
        reply = post(stack, "/v1/responses", **body)
        assert reply.status_code == 200, reply.text
        response = reply.json()
        kinds = [o["type"] for o in response["output"]]
        compacted.append(kinds[0] == "compaction")
        assert "message" in kinds and response["status"] in ("completed", "incomplete")
        if previous is not None and not compacted[-1]:
            # Replayed without compacting again: counted as input_tokens counts it.
            assert response["usage"]["input_tokens"] == expected < threshold
        if stack.settings.models[0].name == "tiny-chat":
            assert response["output"][kinds.index("message")]["content"][0]["text"] == word
        previous = response["id"]
    assert compacted[0] and compacted.count(True) >= 2
    if stack.settings.models[0].name == "tiny-chat":
        assert compacted.count(False) >= 2


@pytest.mark.parametrize("threshold", [0, 100_000_001])
def test_compact_threshold_bounds(stack: Stack, threshold: int) -> None:
    reply = post(stack, "/v1/responses", input="Reply with: hi", context_management=cm(threshold))
    assert error(reply)["param"] == "context_management[0].compact_threshold"


def test_summary_cap_defaults_to_1024(random_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """max_output_tokens bounds the summary generation; 1024 when absent."""
    assert random_stack.core is not None
    worker = random_stack.core.models.default.runtime.worker
    caps: list[int] = []
    real_submit = worker.submit

    def spy(
        tokens: Any, sampling: Any, processors: Any = (), checkpoints: Any = (), **kw: Any
    ) -> Any:
        caps.append(sampling.max_tokens)
        if sampling.max_tokens > 100:
            # The cap is what this test is after: spare the CPU the 1024 tokens.
            raise QueueFullError("spared")
        return real_submit(tokens, sampling, processors, checkpoints, **kw)

    monkeypatch.setattr(worker, "submit", spy)
    # A 4096-token window and a ~2,500-token history leave more than 1024 tokens of room.
    items = [*history()[:-1], {"role": "user", "content": rains(2300)}, history()[-1]]
    items.insert(-1, {"role": "assistant", "content": "rain"})
    base = {"input": items, "keep_tokens": 64, "temperature": 0}
    small = post(random_stack, "/v1/responses/compact", **base, max_output_tokens=7)
    assert small.status_code == 200, small.text
    assert caps == [7] and small.json()["usage"]["output_tokens"] <= 7
    assert error(post(random_stack, "/v1/responses/compact", **base), 503)
    assert caps == [7, 1024]


def test_a_conversation_replays_its_compaction(stack: Stack) -> None:
    conversation = "conv_compaction"
    before = count(stack, input=history())
    first = post(stack, "/v1/responses", input=history(), conversation=conversation,
                 context_management=cm(100), max_output_tokens=8).json()  # fmt: skip
    assert first["output"][0]["type"] == "compaction"
    hop = {"input": "Reply with: moon", "conversation": conversation}
    replayed = count(stack, **hop)
    assert replayed < before
    second = post(stack, "/v1/responses", **hop, context_management=cm(replayed + 1)).json()
    assert second["output"][0]["type"] == "message"
    assert second["usage"]["input_tokens"] == replayed
    assert text_of(second["output"][0]) == "moon"
    # A refused compaction changes nothing: no turn reaches the transcript.
    fresh = {"input": "Reply with: hi", "conversation": "conv_compaction_refused"}
    refused = post(stack, "/v1/responses", **fresh, context_management=cm(1))
    assert error(refused)["code"] == "context_length_exceeded"
    assert count(stack, **fresh) == count(stack, input="Reply with: hi")


def test_cancel_stops_a_job_while_it_compacts(random_stack: Stack) -> None:
    items = [*history()[:-1], {"role": "user", "content": rains(2300)}, history()[-1]]
    items.insert(-1, {"role": "assistant", "content": "rain"})
    queued = post(random_stack, "/v1/responses", input=items, background=True,
                  context_management=cm(1000), temperature=0).json()  # fmt: skip
    assert queued["status"] == "queued"
    cancelled = httpx.post(f"{random_stack.base_url}/v1/responses/{queued['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert _poll(random_stack, queued["id"])["status"] == "cancelled"
    # The summary generation left the engine.
    until(lambda: random_stack.engine_stats.active == 0, "the engine holds no sequence")


def test_cancel_stops_a_foreground_stream_while_it_compacts(random_stack: Stack) -> None:
    """A foreground turn is in flight from its compaction on: a cancel by id ends it there."""
    assert random_stack.core is not None
    pipeline = random_stack.core.pipeline
    items = [*history()[:-1], {"role": "user", "content": rains(2300)}, history()[-1]]
    items.insert(-1, {"role": "assistant", "content": "rain"})
    before = count(random_stack, input=items)
    body = {"model": name(random_stack), "input": items, "stream": True, "temperature": 0,
            "context_management": cm(1000)}  # fmt: skip
    events: list[dict[str, Any]] = []

    def consume() -> None:
        url = f"{random_stack.base_url}/v1/responses"
        with httpx.stream("POST", url, json=body, timeout=120) as reply:
            events.extend(
                json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: ")
            )

    known = set(pipeline.in_flight)
    reader = threading.Thread(target=consume)
    reader.start()
    deadline = time.monotonic() + 30
    while not (set(pipeline.in_flight) - known) and time.monotonic() < deadline:
        time.sleep(0.01)
    (rid,) = set(pipeline.in_flight) - known
    # The summary generation (up to 1,024 tokens of the random model) is running.
    while not random_stack.engine_stats.active and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not events, "nothing streams before the compaction is done"
    cancelled = httpx.post(f"{random_stack.base_url}/v1/responses/{rid}/cancel", timeout=60)
    assert cancelled.status_code == 200, cancelled.text
    reader.join(60)
    assert not reader.is_alive()
    final = cancelled.json()
    assert (final["id"], final["status"], final["output"]) == (rid, "cancelled", [])
    assert final["usage"]["input_tokens"] == before, "cancelled before the compaction finished"
    types = [e["type"] for e in events]
    # The Responses API has no cancelled event: its response.failed carries status cancelled.
    assert types == ["response.created", "response.in_progress", "response.failed"]
    assert events[-1]["response"] == final
    assert rid not in pipeline.in_flight
    until(lambda: random_stack.engine_stats.active == 0, "the engine holds no sequence")
