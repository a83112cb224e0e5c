"""One model served by two processes over MLX's ring backend on 127.0.0.1 (issue #40).

Each group answers as one process does: the same greedy tokens for the same requests, streamed
or not, constrained by a JSON schema or a tool call, four at once, and after a cancel (a rank
that kept decoding a cancelled sequence would step another batch than rank 0, and the next
answers would differ or hang). A rank that dies or stalls fails the requests in flight and
turns the core's health NOT_SERVING within the timeout (a stalled rank, found by the watchdog:
tests/unit/test_lockstep.py). A group is one core to the façades: behind one façade with another
core and a shared Redis, turns cross between them, and a lost group is routed around.

One random qwen2 serves every group (mlx-lm shards it tensor- and pipeline-parallel); one
in-process stack of it is the reference.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from grpc_health.v1 import health_pb2

from tests.support.group import Group, _children, by_hand, launched
from tests.support.processes import free_port, process, wait_serving, wait_status
from tests.support.random_model import build_random_model
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack
from tests.support.tools import WEATHER

pytestmark = pytest.mark.e2e

TIMEOUT = 4.0  # --distributed-timeout of the groups that lose a rank
PROMPTS = ("Tell me about the sea.", "List three colours", "Why is the sky blue?", "Count")
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random qwen2 that mlx-lm splits both ways (4 layers, 4 heads, 2 KV heads)."""
    return build_random_model(
        tmp_path_factory.mktemp("distributed") / "q2",
        model_type="qwen2",
        layers=4,
        heads=4,
        kv_heads=2,
        index=True,
    )


@pytest.fixture(scope="module")
def reference(model: Path) -> Iterator[str]:
    """The same model served by one process (this one: a stack in process)."""
    with Stack.running(model_path=model) as stack:
        yield stack.base_url


@pytest.fixture(scope="module")
def tensor_group(model: Path) -> Iterator[Group]:
    """The acceptance's launch: mlx.launch -n 2 --backend ring, tensor parallel."""
    with launched(model, "tensor") as group:
        yield group


# The reference's answers by request: each is asked once.
_ANSWERS: dict[str, list[Any]] = {}


def _alone(url: str, **body: Any) -> list[Any]:
    """What one process answers to `body` (asked once per body)."""
    key = json.dumps(body, sort_keys=True)
    if key not in _ANSWERS:
        _ANSWERS[key] = _answer(_respond(url, **body))
    return _ANSWERS[key]


def _respond(url: str, **body: Any) -> dict[str, Any]:
    reply = httpx.post(
        f"{url}/v1/responses",
        json={"model": "q2", "temperature": 0, "max_output_tokens": 24, **body},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def _answer(response: dict[str, Any]) -> list[Any]:
    """What a response says: each output item's text or call, and its token counts."""
    said: list[Any] = []
    for item in response["output"]:
        if item["type"] == "message":
            said.append("".join(part["text"] for part in item["content"]))
        elif item["type"] == "function_call":
            said.append((item["name"], item["arguments"]))
    usage = response["usage"]
    return [response["status"], said, usage["input_tokens"], usage["output_tokens"]]


def _events(url: str, **body: Any) -> Iterator[dict[str, Any]]:
    request = {"model": "q2", "temperature": 0, "stream": True, **body}
    with httpx.stream("POST", f"{url}/v1/responses", json=request, timeout=120) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[6:])


def test_greedy_answers_as_one_process(tensor_group: Group, reference: str) -> None:
    for prompt in PROMPTS[:2]:
        assert _answer(_respond(tensor_group.url, input=prompt)) == _alone(reference, input=prompt)


def test_streamed_answer_as_one_process(tensor_group: Group, reference: str) -> None:
    events = list(_events(tensor_group.url, input=PROMPTS[2], max_output_tokens=16))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert events[-1]["type"] == "response.incomplete"  # max_output_tokens: it never ends
    assert [text] == _alone(reference, input=PROMPTS[2], max_output_tokens=16)[1]


def test_cancel_leaves_the_ranks_in_step(tensor_group: Group, reference: str) -> None:
    """A stream closed after a few tokens cancels its sequence on every rank: the next
    requests answer as one process does (batched with nothing left over)."""
    seen = 0
    for event in _events(tensor_group.url, input=PROMPTS[0], max_output_tokens=2000):
        seen += event["type"] == "response.output_text.delta"
        if seen == 3:
            break  # the client goes: the core cancels the generation
    for prompt in PROMPTS[1:3]:
        assert _answer(_respond(tensor_group.url, input=prompt)) == _alone(reference, input=prompt)


def test_json_schema_as_one_process(tensor_group: Group, reference: str) -> None:
    """The schema's grammar is built on every rank from the spec rank 0 sends."""
    text = {"format": {"type": "json_schema", "name": "person", "schema": SCHEMA, "strict": True}}
    body = {"input": "Describe a person", "text": text, "max_output_tokens": 60}
    group = _answer(_respond(tensor_group.url, **body))
    assert group == _alone(reference, **body)
    assert set(json.loads(group[1][0])) == {"name", "age"}


def test_tool_call_as_one_process(tensor_group: Group, reference: str) -> None:
    body = {"input": "Weather in Paris?", "tools": [WEATHER], "tool_choice": "required"}
    body["max_output_tokens"] = 60
    group = _answer(_respond(tensor_group.url, **body))
    assert group == _alone(reference, **body)
    assert group[1][0][0] == "get_weather"


def test_four_at_once_as_one_process(tensor_group: Group, reference: str) -> None:
    """Four requests batched together on the group: each answers as it does alone on one
    process (the batch decodes each sequence as mlx-lm decodes it alone)."""
    answers: dict[str, list[Any]] = {}

    def ask(prompt: str) -> None:
        answers[prompt] = _answer(_respond(tensor_group.url, input=prompt))

    threads = [threading.Thread(target=ask, args=(p,)) for p in PROMPTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert answers == {p: _alone(reference, input=p) for p in PROMPTS}


def test_pipeline_answers_as_one_process_and_a_killed_rank_fails_loudly(
    model: Path, reference: str
) -> None:
    """Pipeline parallel (each rank its own layers; mlx-lm's BatchGenerator, the GPU's
    default, where the tensor group runs our slots) answers as one process; then rank 1 is
    killed mid-stream: the stream ends with response.failed within the timeout, and the
    core's health turns NOT_SERVING (rank 0 stays up, routed around, until restarted)."""
    flags = ("--distributed-timeout", str(TIMEOUT), "--engine", "batch")
    with by_hand(model, "pipeline", *flags) as group:
        for prompt in PROMPTS[:2]:
            assert _answer(_respond(group.url, input=prompt)) == _alone(reference, input=prompt)
        events = _events(group.url, input=PROMPTS[0], max_output_tokens=100000)
        for event in events:
            if event["type"] == "response.output_text.delta":
                break
        os.kill(group.procs[1].pid, signal.SIGKILL)
        killed = time.monotonic()
        last = [e["type"] for e in events][-1]
        assert last == "response.failed"  # the stream ended: the loss was noticed
        _wait_not_serving(group, killed)
        assert group.procs[0].poll() is None  # rank 0 up, NOT_SERVING
        reply = httpx.post(f"{group.url}/v1/responses", json={"model": "q2", "input": "x"})
        assert reply.status_code == 503


def _cores(pids: list[int], seconds: float) -> list[float]:
    """The cores each process kept busy over `seconds` (its CPU time from /proc)."""

    def used(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = [used(pid) for pid in pids]
    time.sleep(seconds)
    return [(used(pid) - b) / seconds for pid, b in zip(pids, before, strict=True)]


def test_an_idle_launch_keeps_no_core_busy(tensor_group: Group) -> None:
    """Idle, the other rank waits on rank 0's doorbell, not in a ring collective (which spins
    a core), and mlx.launch's relay stops polling once the ranks have closed their stdin (the
    group's launcher was given one byte on its stdin: tests/support/group.py)."""
    launcher = tensor_group.procs[0].pid
    pids = [launcher, *_children(launcher)]
    assert len(pids) == 3
    time.sleep(0.5)  # rank 0 parks the other 50 ms after its last step
    cores = _cores(pids, 1.5)
    assert max(cores) < 0.2, f"cores busy while idle (launcher, rank 0, rank 1): {cores}"
    assert _answer(_respond(tensor_group.url, input=PROMPTS[3]))[0] == "incomplete"


def test_a_parked_group_outlives_its_timeout_and_wakes_for_a_request(
    model: Path, reference: str
) -> None:
    """Parked longer than --distributed-timeout, the other rank is kept alive by rank 0's
    heartbeat (a ring, one collective, parked again) at no core's cost, and the group answers
    the next request as one process."""
    with by_hand(model, "tensor", "--distributed-timeout", "1") as group:
        time.sleep(0.5)
        cores = _cores([p.pid for p in group.procs], 2.0)
        assert max(cores) < 0.2, f"cores busy while idle (rank 0, rank 1): {cores}"
        assert group.health() == health_pb2.HealthCheckResponse.SERVING
        prompt = PROMPTS[1]
        assert _answer(_respond(group.url, input=prompt)) == _alone(reference, input=prompt)


def test_a_group_without_a_doorbell_serves_as_before(model: Path, reference: str) -> None:
    """Where rank 0 cannot open its doorbell (here: the address it is told is not its own; under
    mpi: none is told), it says so and the group serves with its idle ranks in the collective."""
    elsewhere = {0: {"MLX_JACCL_COORDINATOR": "203.0.113.1:5000"}}  # TEST-NET: not this host
    with by_hand(model, "tensor", rank_env=elsewhere) as group:
        prompt = PROMPTS[0]
        assert _answer(_respond(group.url, input=prompt)) == _alone(reference, input=prompt)
        assert "no doorbell (idle ranks will spin)" in group.logs[0].read_text()


def _served(metrics_port: int) -> float:
    """How many requests a core's engine has finished (its Prometheus counter)."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    name = "mlx_responses_request_success_total"
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_a_group_and_a_core_behind_one_facade_share_redis(
    model: Path, reference: str, redis_server: RedisServer
) -> None:
    """A 2-rank tensor group (`core --distributed tensor`, by hand) and a one-process `core`
    on the same model and Redis, behind one `facade --core-routing round_robin`: turns land on
    both and answer as one process; a previous_response_id chain and a conversation cross from
    one to the other; once the group loses rank 1 its health turns NOT_SERVING within the
    timeout, and the façade answers every new request through the other core, chains on the
    group's turns included. (The other core is one process, not a second group: to the façade
    a group is one core, and a second group would double the ring's cost on the CI machine.)"""
    store = redis_server.url(5)
    meter = {"group": free_port(), "core": free_port()}
    http, core_port = free_port(), free_port()
    args = ("--model", str(model), "--store", store, "--no-prompt-cache-disk")
    group_flags = ("--store", store, "--distributed-timeout", str(TIMEOUT))
    with (
        by_hand(
            model, "tensor", *group_flags, "--metrics-port", str(meter["group"]), command="core"
        ) as group,
        process(
            "core", *args, "--grpc-port", str(core_port), "--metrics-port", str(meter["core"])
        ) as core,
        process(
            "facade",
            "--core",
            f"127.0.0.1:{group.grpc_port}",
            "--core",
            f"127.0.0.1:{core_port}",
            "--core-routing",
            "round_robin",
            "--port",
            str(http),
        ) as facade,
    ):
        wait_serving(core_port)
        wait_status(http, 200, facade)
        url = f"http://127.0.0.1:{http}"
        before = {name: _served(port) for name, port in meter.items()}

        def landed() -> str:
            """The core that served the last request (its counter moved by one)."""
            now = {name: _served(port) for name, port in meter.items()}
            moved = [name for name in now if now[name] != before[name]]
            assert len(moved) == 1 and now[moved[0]] - before[moved[0]] == 1, (now, before)
            before.update(now)
            return moved[0]

        # A chain: each turn on the other core, read from Redis; answers as one process.
        first = _respond(url, input=PROMPTS[0])
        one = landed()
        second = _respond(url, input=PROMPTS[1], previous_response_id=first["id"])
        assert {one, landed()} == {"group", "core"}
        alone = _respond(reference, input=PROMPTS[0])
        alone_second = _respond(reference, input=PROMPTS[1], previous_response_id=alone["id"])
        assert _answer(first) == _answer(alone) and _answer(second) == _answer(alone_second)
        assert second["previous_response_id"] == first["id"]

        # A conversation: its two turns on the two cores, the second reading the first's items.
        def conversation(base: str) -> str:
            reply = httpx.post(f"{base}/v1/conversations", json={}, timeout=30)
            assert reply.status_code == 200, reply.text
            return str(reply.json()["id"])

        talk, talk_alone = conversation(url), conversation(reference)
        said = []
        for prompt in PROMPTS[2:4]:
            said.append(_answer(_respond(url, input=prompt, conversation=talk)))
            said[-1].append(landed())
        alone_said = [
            _answer(_respond(reference, input=p, conversation=talk_alone)) for p in PROMPTS[2:4]
        ]
        assert [s[:-1] for s in said] == alone_said
        assert {s[-1] for s in said} == {"group", "core"}

        # The group loses rank 1: NOT_SERVING within the timeout, the façade routes around it.
        os.kill(group.procs[1].pid, signal.SIGKILL)
        killed = time.monotonic()
        _wait_not_serving(group, killed)
        for prompt in PROMPTS:
            reply = _respond(url, input=prompt, previous_response_id=second["id"])
            assert landed() == "core"
            alone = _respond(reference, input=prompt, previous_response_id=alone_second["id"])
            assert _answer(reply) == _answer(alone)
        assert group.procs[0].poll() is None and core.alive()  # rank 0 up, routed around


def _wait_not_serving(group: Group, since: float) -> None:
    """Until the core says NOT_SERVING (it notices the loss by the group's timeout; the bound
    here only guards against a hang, however loaded the machine)."""
    while group.health() != health_pb2.HealthCheckResponse.NOT_SERVING:
        assert time.monotonic() - since < 30 * TIMEOUT, group.output()
        time.sleep(0.1)


def test_a_mode_without_a_group_is_refused(model: Path) -> None:
    """`--distributed tensor` outside mlx.launch: exit 2 with the reason (one process would
    otherwise serve alone while its operator believes it sharded)."""
    with process("serve", "--distributed", "tensor", "--model", str(model)) as proc:
        assert proc.wait(60) == 2
        assert "needs a group of processes: start them with mlx.launch" in proc.output()
