"""The console script scaled out: two `core --store redis://` processes behind one façade."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.test_processes import _free_port, _process, _wait_healthy
from tests.support.processes import wait_serving
from tests.support.redis_server import RedisServer
from tests.support.waits import until

pytestmark = pytest.mark.e2e


def test_two_core_processes_share_redis_behind_one_facade(
    model_path: Path, redis_server: RedisServer
) -> None:
    store = redis_server.url(2)
    http, one, two = _free_port(), _free_port(), _free_port()
    core_args = ["core", "--model", str(model_path), "--store", store, "--grpc-port"]
    cores = ["--core", f"127.0.0.1:{one}", "--core", f"127.0.0.1:{two}"]
    with (
        _process(*core_args, str(one)) as first,
        _process(*core_args, str(two)),
        _process("facade", *cores, "--port", str(http)) as facade,
    ):
        wait_serving(one)
        wait_serving(two)
        _wait_healthy(http, facade)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{http}/v1", api_key="x", max_retries=0)
        turn = client.responses.create(
            model=model_path.name, input="Reply with: hello", max_output_tokens=16
        )
        assert turn.output_text == "hello"
        # Round robin: the next turn goes to the other core, which reads the chain from Redis.
        chained = client.responses.create(
            model=model_path.name,
            input="Reply with: world",
            previous_response_id=turn.id,
            max_output_tokens=16,
        )
        assert chained.output_text == "world" and chained.previous_response_id == turn.id
        # One core goes away: the façade routes every request to the other.
        first.terminate()
        first.wait(15)
        # The façade's health watch on it has ended: its /metrics says so.
        down = f'mlx_responses_core_serving{{core="127.0.0.1:{one}"}} 0.0'
        metrics = f"http://127.0.0.1:{http}/metrics"
        until(lambda: down in httpx.get(metrics, timeout=10).text, "the façade saw core one go")
        for word in ("cat", "dog", "sun"):
            reply = client.responses.create(
                model=model_path.name,
                input=f"Reply with: {word}",
                previous_response_id=chained.id,
                max_output_tokens=16,
            )
            assert reply.output_text == word
        assert client.responses.retrieve(turn.id).output_text == "hello"
