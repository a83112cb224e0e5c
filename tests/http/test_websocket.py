"""The Responses WebSocket mode through the OpenAI SDK's `client.responses.connect()`."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import openai
import pytest
from mlx_responses.http_facade.app import start_facade
from mlx_responses.http_facade.config import FacadeSettings
from mlx_responses.http_facade.responses.websocket import MAX_MESSAGE

from tests.support.stack import Stack
from tests.support.waits import until

UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}
TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")


@pytest.fixture(scope="module")
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _name(stack: Stack) -> str:
    return stack.settings.models[0].name


def _until_done(connection: Any) -> list[Any]:
    """The events of one response (or the error that replaced it)."""
    events = []
    for event in connection:
        events.append(event)
        if event.type in TERMINAL:
            return events
    raise AssertionError("the socket closed mid-response")


def _sse_types(stack: Stack, **body: Any) -> list[str]:
    reply = httpx.post(
        f"{stack.base_url}/v1/responses",
        json={"model": _name(stack), "stream": True, **body},
        timeout=60,
    )
    return [
        json.loads(line[6:])["type"]
        for line in reply.text.splitlines()
        if line.startswith("data: ")
    ]


def test_events_are_those_of_a_streamed_create(client: openai.OpenAI, stack: Stack) -> None:
    body = {"input": "Reply with: hello", "max_output_tokens": 20}
    with client.responses.connect() as connection:
        connection.response.create(model=_name(stack), **body)  # type: ignore[arg-type]
        events = _until_done(connection)
    assert [e.type for e in events] == _sse_types(stack, **body)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == "hello"


def test_store_false_turns_chain_on_the_socket(client: openai.OpenAI, stack: Stack) -> None:
    with client.responses.connect() as connection:
        connection.response.create(
            model=_name(stack), input="Reply with: hello", store=False, max_output_tokens=20
        )
        first = _until_done(connection)[-1].response
        connection.response.create(
            model=_name(stack),
            previous_response_id=first.id,
            input="Reply with: bye",
            store=False,
            max_output_tokens=20,
        )
        second = _until_done(connection)[-1].response
    assert second.previous_response_id == first.id
    # The second turn read the whole chain: its prompt is the history spelled out.
    history = [
        {"role": "user", "content": "Reply with: hello"},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"role": "user", "content": "Reply with: bye"},
    ]
    counted = client.responses.input_tokens.count(model=_name(stack), input=history)
    assert second.usage is not None and second.usage.input_tokens == counted.input_tokens
    # Nothing was stored: over HTTP the chain is unknown.
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model=_name(stack), previous_response_id=first.id, input="x", max_output_tokens=4
        )


def test_stored_turns_chain_across_sockets(client: openai.OpenAI, stack: Stack) -> None:
    with client.responses.connect() as connection:
        connection.response.create(model=_name(stack), input="Reply with: rain")
        first = _until_done(connection)[-1].response
    with client.responses.connect() as connection:
        connection.response.create(
            model=_name(stack), previous_response_id=first.id, input="Reply with: snow"
        )
        second = _until_done(connection)[-1].response
    assert second.status == "completed" and second.previous_response_id == first.id
    assert client.responses.retrieve(second.id).id == second.id


def test_errors_arrive_as_error_events_and_the_socket_goes_on(
    client: openai.OpenAI, stack: Stack
) -> None:
    with client.responses.connect() as connection:
        connection.response.create(
            model=_name(stack), previous_response_id="resp_unknown", input="x"
        )
        (error,) = _until_done(connection)
        assert error.type == "error" and error.status == 400
        assert error.error.code == "previous_response_not_found"
        connection.response.create(model=_name(stack), input="x", background=True)
        (error,) = _until_done(connection)
        assert error.error.param == "background"
        connection.send({"type": "response.cancel"})  # type: ignore[arg-type, typeddict-item]
        (error,) = _until_done(connection)
        assert error.error.param == "type"
        connection.response.create(model=_name(stack), input="Reply with: hello")
        assert _until_done(connection)[-1].type == "response.completed"


@pytest.mark.parametrize(
    "text", ["[" * 5000 + "]" * 5000, '{"type": "response.create", "temperature": NaN}', "{"]
)
def test_hostile_json_is_an_error_event_and_the_socket_goes_on(stack: Stack, text: str) -> None:
    """A message is held to a body's bounds (depth, NaN): too deep once broke the socket."""

    async def exchange() -> list[dict[str, Any]]:
        url = f"{stack.base_url}/v1/responses"
        async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
            await ws.send_str(text)
            replies = [json.loads((await ws.receive(timeout=30)).data)]
            await ws.send_str(json.dumps({"type": "nope"}))
            replies.append(json.loads((await ws.receive(timeout=30)).data))
            return replies

    refused, goes_on = asyncio.run(exchange())
    assert refused["type"] == "error" and refused["status"] == 400, refused
    assert refused["error"]["code"] == "invalid_json"
    assert goes_on["type"] == "error" and goes_on["error"]["param"] == "type"


def test_a_message_over_the_limit_is_a_413_event_and_the_socket_goes_on(stack: Stack) -> None:
    """As a body over --max-request-bytes is a 413: the socket was closed (1009) unanswered."""
    assert stack.runner is not None
    limit = stack.runner.app[MAX_MESSAGE]

    async def exchange() -> list[dict[str, Any]]:
        url = f"{stack.base_url}/v1/responses"
        async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
            await ws.send_str(json.dumps({"type": "response.create", "model": "x" * limit}))
            replies = [json.loads((await ws.receive(timeout=60)).data)]
            await ws.send_str(json.dumps({"type": "nope"}))
            replies.append(json.loads((await ws.receive(timeout=30)).data))
            return replies

    refused, goes_on = asyncio.run(exchange())
    assert refused["type"] == "error" and refused["status"] == 413, refused
    assert refused["error"]["code"] == "request_too_large"
    assert set(refused["error"]) == {"message", "type", "param", "code"}
    assert goes_on["type"] == "error" and goes_on["error"]["param"] == "type"


def test_lanes_run_side_by_side_and_echo_their_stream_id(
    client: openai.OpenAI, stack: Stack
) -> None:
    with client.responses.connect() as connection:
        for lane in ("a", "b"):
            connection.response.create(
                model=_name(stack), input="Reply with: hello", stream_id=lane, max_output_tokens=20
            )
        done: dict[str, Any] = {}
        for event in connection:
            assert event.stream_id in ("a", "b")  # type: ignore[union-attr]
            if event.type == "response.completed":
                done[event.stream_id] = event.response  # type: ignore[union-attr]
                if len(done) == 2:
                    break
    assert {r.output_text for r in done.values()} == {"hello"}


def test_generate_false_warms_up_a_chain(client: openai.OpenAI, stack: Stack) -> None:
    with client.responses.connect() as connection:
        connection.response.create(
            model=_name(stack),
            input=[{"role": "developer", "content": "Answer with one word."}],
            store=False,
            generate=False,
        )
        warm = _until_done(connection)[-1].response
        assert warm.status == "completed" and warm.output == []
        assert warm.usage is not None and warm.usage.output_tokens == 0
        connection.response.create(
            model=_name(stack),
            previous_response_id=warm.id,
            input="Reply with: hello",
            store=False,
            max_output_tokens=20,
        )
        reply = _until_done(connection)[-1].response
    assert reply.output_text == "hello" and reply.previous_response_id == warm.id


def test_the_core_keys_guard_the_socket(make_stack: Any) -> None:
    """The façade forwards the socket's key to the core, which refuses a wrong one."""
    stack = make_stack(api_keys=("sk-right",))
    for key, expected in (("sk-wrong", "error"), ("sk-right", "response.completed")):
        client = openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=key, max_retries=0)
        with client.responses.connect() as connection:
            connection.response.create(model=_name(stack), input="Reply with: hello")
            last = _until_done(connection)[-1]
        assert last.type == expected
        if expected == "error":
            assert last.status == 401


@pytest.fixture
def busy_socket(random_stack: Stack) -> Iterator[tuple[Stack, Any]]:
    client = openai.OpenAI(base_url=f"{random_stack.base_url}/v1", api_key="x", max_retries=0)
    with client.responses.connect() as connection:
        # The SDK's receive has no timeout: a socket that stays silent is closed, so the test
        # fails on the closed socket instead of hanging.
        watchdog = threading.Timer(60, connection.close)
        watchdog.start()
        try:
            yield random_stack, connection
        finally:
            watchdog.cancel()


def test_closing_the_socket_cancels_its_generation(busy_socket: tuple[Stack, Any]) -> None:
    stack, connection = busy_socket
    stats = stack.engine_stats
    # Greedy: the same long generation every run (seen once in a full run: no sequence active
    # after five deltas, unexplained; sampling is one variation less).
    connection.response.create(
        model=_name(stack), input="Tell me a long story.", max_output_tokens=100_000, temperature=0
    )
    deltas = 0
    for event in connection:
        deltas += event.type == "response.output_text.delta"
        if deltas >= 5:
            break
    assert stats.active == 1
    connection.close()
    until(lambda: stats.active == 0, "the engine let the closed connection's sequence go")


def test_the_facade_keys_guard_the_handshake(stack: Stack) -> None:
    settings = FacadeSettings(host="127.0.0.1", port=0, api_keys=("sk-right",))
    runner, port = stack.run(start_facade(stack.grpc_address, settings))
    try:
        for key in ("sk-wrong", None):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            refused = httpx.get(
                f"http://127.0.0.1:{port}/v1/responses",
                headers={**headers, **UPGRADE},
                timeout=10,
            )
            assert refused.status_code == 401, refused.text
            assert refused.json()["error"]["type"] == "invalid_request_error"
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-right")
        with client.responses.connect() as connection:
            connection.response.create(model=_name(stack), input="Reply with: hello")
            assert _until_done(connection)[-1].type == "response.completed"
    finally:
        stack.run(runner.cleanup())


def test_a_plain_get_is_not_a_socket(stack: Stack) -> None:
    reply = httpx.get(f"{stack.base_url}/v1/responses", timeout=10)
    assert reply.status_code == 405


def test_one_socket_cannot_queue_without_bound(random_stack: Stack) -> None:
    """A lane's queue and the number of lanes are bounded: the excess gets error events."""
    from mlx_responses.http_facade.responses.websocket import MAX_LANES, MAX_QUEUED_PER_LANE

    client = openai.OpenAI(base_url=f"{random_stack.base_url}/v1", api_key="x", max_retries=0)
    with client.responses.connect() as connection:
        body = {"model": _name(random_stack), "input": "x", "max_output_tokens": 100_000}
        for _ in range(MAX_QUEUED_PER_LANE + 2):  # one runs, the rest wait
            connection.response.create(**body)  # type: ignore[arg-type]
        for lane in range(MAX_LANES):
            connection.response.create(stream_id=f"lane{lane}", **body)  # type: ignore[arg-type]
        # The two refusals may come in either order, among others (a lane whose request finds
        # the generation queue full gets its own 503): wait for both.
        errors = []
        for event in connection:
            if event.type == "error":
                errors.append(event)
                if {e.status for e in errors} >= {429, 400}:
                    break
    queued = [e for e in errors if e.status == 429]
    lanes = [e for e in errors if e.status == 400]
    assert queued and queued[0].stream_id is None
    assert lanes and lanes[0].error.param == "stream_id"
