"""Faults on real processes: the core killed and restarted under a live façade; SIGTERM drains."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st
from mlx_responses.v1 import storage_service_pb2_grpc as st_grpc
from tests.support.processes import free_port, process, wait_status
from tests.support.random_model import build_random_model
from tests.support.waits import until

pytestmark = pytest.mark.e2e

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


def _stream(base: str, body: dict[str, Any], frames: list[dict[str, Any]], **kw: Any) -> None:
    """Reads one SSE stream to its end into `frames` (the data of each event)."""
    with httpx.stream("POST", f"{base}/v1/responses", json=body, timeout=120) as reply:
        assert reply.status_code == 200, reply.read()
        buffer = ""
        for chunk in reply.iter_text():
            buffer += chunk
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                frames.append(json.loads(frame.split("\n")[1][len("data: ") :]))
                if kw.get("on_frame"):
                    kw["on_frame"](len(frames))


def _long(model: str, tokens: int = 100_000, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "input": "go on",
        "stream": True,
        "max_output_tokens": tokens,
        "temperature": 0,
        **extra,
    }


def test_core_killed_then_restarted_under_a_live_facade(random_model: Path) -> None:
    http, grpc_port = free_port(), free_port()
    core_args = ("core", "--model", str(random_model), "--grpc-port", str(grpc_port))
    base = f"http://127.0.0.1:{http}"
    with process("facade", "--core", f"127.0.0.1:{grpc_port}", "--port", str(http)) as facade:
        with process(*core_args) as core:
            wait_status(http, 200, facade)
            frames: list[dict[str, Any]] = []

            def kill_at_ten(count: int) -> None:
                if count == 10:
                    core.signal(signal.SIGKILL)

            _stream(base, _long(random_model.name), frames, on_frame=kill_at_ten)
            assert frames[-1]["type"] == "response.failed"
            assert frames[-1]["response"]["status"] == "failed"
            assert [f["sequence_number"] for f in frames] == list(range(len(frames)))
            core.wait(10)

        # The core is gone: clear 503s, /health 503, the façade itself stays up.
        down = httpx.post(f"{base}/v1/responses", json=_long(random_model.name, 4), timeout=30)
        assert down.status_code == 503, down.text
        error = down.json()["error"]
        assert error["code"] == "core_unavailable"
        assert "unavailable" in error["message"]
        assert httpx.get(f"{base}/health", timeout=10).status_code == 503
        assert facade.alive()

        # The core comes back on the same port: service resumes without touching the façade.
        with process(*core_args) as again:
            wait_status(http, 200, again, timeout=90)
            body = {"model": random_model.name, "input": "hi", "max_output_tokens": 4}
            reply = httpx.post(f"{base}/v1/responses", json=body, timeout=60)
            assert reply.status_code == 200, reply.text
            assert reply.json()["status"] == "incomplete"
        assert facade.alive()


GRACE_S = 10


@pytest.fixture(scope="module")
def endless_model(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A random model with a 65,536-token window: a request for all of it cannot end inside
    the grace on any CPU (it never emits an end token), while 150 tokens end inside it even on
    a machine loaded several times over; so which request drains and which is cancelled
    depends on the work, not on the machine's speed."""
    return build_random_model(
        tmp_path_factory.mktemp("endless") / "endless-chat",
        seed=3,
        context=65_536,
        tokenizer_from=model_path,
    )


def test_sigterm_drains_then_cancels_and_exits_zero(endless_model: Path) -> None:
    random_model = endless_model
    http, grpc_port = free_port(), free_port()
    base = f"http://127.0.0.1:{http}"
    with process(
        "serve", "--model", str(random_model), "--port", str(http), "--grpc-port", str(grpc_port),
        "--shutdown-grace-secs", str(GRACE_S),
    ) as proc:  # fmt: skip
        wait_status(http, 200, proc)
        short: list[dict[str, Any]] = []
        long: list[dict[str, Any]] = []
        started, short_started = threading.Event(), threading.Event()
        threads = [
            threading.Thread(
                target=_stream,
                args=(base, _long(random_model.name, 150), short),
                kwargs={"on_frame": lambda n: n == 1 and short_started.set()},
                daemon=True,
            ),
            threading.Thread(
                target=_stream,
                args=(base, _long(random_model.name), long),
                kwargs={"on_frame": lambda n: n == 5 and started.set()},
                daemon=True,
            ),
        ]
        job = httpx.post(
            f"{base}/v1/responses",
            json={**_long(random_model.name), "stream": False, "background": True},
            timeout=30,
        )
        assert job.status_code == 200, job.text
        for thread in threads:
            thread.start()
        # Both streams are running before the signal (under load the short one may start late).
        assert started.wait(60) and short_started.wait(60)
        began = time.monotonic()
        proc.signal(signal.SIGTERM)
        until(lambda: "shutting down" in proc.output(), "the server began its shutdown")
        # No new work is accepted while draining.
        with pytest.raises(httpx.HTTPError):
            httpx.post(f"{base}/v1/responses", json=_long(random_model.name, 4), timeout=5)
        assert proc.wait(60) == 0
        elapsed = time.monotonic() - began
        for thread in threads:
            thread.join(30)
        output = proc.output()
    # The short stream finished inside the grace; the long one and the job were cancelled.
    assert short[-1]["type"] in TERMINAL and short[-1]["response"]["status"] == "incomplete"
    assert long[-1]["type"] in TERMINAL and long[-1]["response"]["status"] == "cancelled"
    assert [f["sequence_number"] for f in long] == list(range(len(long)))
    assert elapsed >= GRACE_S, elapsed  # the grace was given (its end: proc.wait above)
    stopped = re.search(
        r"stopped: (\d+) responses finished in the grace period, (\d+) cancelled", output
    )
    assert stopped is not None, output[-3000:]
    assert int(stopped.group(2)) == 2  # the long stream and the background job
    assert int(stopped.group(1)) >= 1  # the short stream


FACADE_GRACE_S = 5  # 16 tokens in it need 3.2/s; the drain test, 15/s in 10 s, passes loaded


@pytest.mark.parametrize("store", ["stored", "store-disabled"])
def test_sigterm_on_a_standalone_facade_ends_its_streams(endless_model: Path, store: str) -> None:
    """As the drain test, which stream ends and which is cut follows the work, not the clock:
    the long stream (endless_model's 65,536 tokens) cannot end inside the grace on any machine,
    the 16-token one ends inside it even loaded (a 100-token one and a 2 s grace: it was
    cancelled under two CPU burners on a loaded machine)."""
    random_model = endless_model
    http, grpc_port = free_port(), free_port()
    base = f"http://127.0.0.1:{http}"
    core_args = ["core", "--model", str(random_model), "--grpc-port", str(grpc_port)]
    if store == "store-disabled":
        core_args += ["--responses-store-max-entries", "0"]
    facade_args = ["facade", "--core", f"127.0.0.1:{grpc_port}", "--port", str(http)]
    grace = ["--shutdown-grace-secs", str(FACADE_GRACE_S)]
    with process(*core_args) as core, process(*facade_args, *grace) as facade:
        wait_status(http, 200, facade)
        short: list[dict[str, Any]] = []
        long: list[dict[str, Any]] = []
        started, short_started = threading.Event(), threading.Event()
        threads = [
            threading.Thread(
                target=_stream,
                args=(base, _long(random_model.name, 16), short),
                kwargs={"on_frame": lambda n: n == 1 and short_started.set()},
                daemon=True,
            ),
            threading.Thread(
                target=_stream,
                args=(base, _long(random_model.name), long),
                kwargs={"on_frame": lambda n: n == 5 and started.set()},
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        # Both streams are running before the signal (under load the short one may start late).
        assert started.wait(60) and short_started.wait(60)
        began = time.monotonic()
        facade.signal(signal.SIGTERM)
        assert facade.wait(60) == 0
        elapsed = time.monotonic() - began
        for thread in threads:
            thread.join(30)
        assert core.alive()
        rid = long[0]["response"]["id"]
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            storage = st_grpc.StorageServiceStub(channel)
            try:
                kept = storage.GetResponse(st.GetResponseRequest(id=rid), timeout=10).response
            except grpc.RpcError:
                kept = None
        output = facade.output()
    # The short stream finished; the long one (running for as long as the context allows, past
    # the grace) got a terminal event.
    assert short[-1]["type"] in TERMINAL and short[-1]["response"]["status"] == "incomplete"
    assert long[-1]["type"] == "response.failed"
    assert [f["sequence_number"] for f in long] == list(range(len(long)))
    assert elapsed >= FACADE_GRACE_S, elapsed  # the grace was given
    if store == "stored":
        # Cancelled on its core, exactly as `serve`'s drain ends it: stored as cancelled.
        assert long[-1]["response"]["status"] == "cancelled"
        assert kept is not None and kept.status == pb.RESPONSE_STATUS_CANCELLED
        assert len(kept.output) == 1 and kept.usage.output_tokens > 0
    else:
        # The core cannot cancel it (no store): the façade cuts the call and ends it itself.
        assert long[-1]["response"]["status"] == "failed"
        assert "shut down" in long[-1]["response"]["error"]["message"]
    # (The short stream may have ended before the signal came.)
    assert re.search(r"\d+ finished in the grace period, 1 cancelled", output), output[-3000:]
