"""Coding agents: `--hosted-tools drop` with what Codex sends, namespaced calls, penalties."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import openai
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from mlx_responses.v1 import generation_service_pb2 as gen
from mlx_responses.v1 import generation_service_pb2_grpc as gen_grpc
from mlx_responses.v1 import responses_pb2 as pb
from tests.support.stack import Stack
from tests.support.tools import WEATHER

CODEX_REQUEST = Path(__file__).parents[1] / "fixtures" / "codex_0.169_request.json"
# What Codex adds around its function tools: a hosted tool and a namespace.
AGENT_TOOLS = [
    {"type": "web_search", "external_web_access": False},
    {"type": "namespace", "name": "weather", "description": "Weather tools.", "tools": [WEATHER]},
]
PROMPT = "Use the get_weather tool with city set to paris."


@pytest.fixture(scope="module")
def drop_stack(model_path: Path) -> Iterator[Stack]:
    with Stack.running(model_path=model_path, hosted_tools="drop") as s:
        yield s


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def _codex_body() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(CODEX_REQUEST.read_text())["body"]
    return body


def test_the_codex_request_is_accepted_with_drop(drop_stack: Stack) -> None:
    body = {**_codex_body(), "model": _model(drop_stack)}
    kinds = [t["type"] for t in body["tools"]]
    assert "web_search" in kinds and "namespace" in kinds
    assert body["store"] is False and body["client_metadata"] and body["prompt_cache_key"]
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["input"][0]["role"] == "developer"
    # The whole request validates and renders (tests/e2e/test_codex.py has the real Codex CLI
    # send it and the bundled model answer it).
    reply = httpx.post(f"{drop_stack.base_url}/v1/responses/input_tokens", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["input_tokens"] > 2048


def test_the_codex_request_is_refused_by_default(stack: Stack) -> None:
    body = {**_codex_body(), "model": _model(stack)}
    reply = httpx.post(f"{stack.base_url}/v1/responses/input_tokens", json=body, timeout=60)
    assert reply.status_code == 400
    error = reply.json()["error"]
    first = next(i for i, t in enumerate(body["tools"]) if t["type"] != "function")
    assert (error["param"], error["code"]) == (f"tools[{first}].type", "unsupported_tool")


def test_namespaced_call_comes_back_namespaced_and_replays(drop_stack: Stack) -> None:
    client = openai.OpenAI(base_url=f"{drop_stack.base_url}/v1", api_key="x", max_retries=0)
    first = client.responses.create(
        model=_model(drop_stack),
        input=PROMPT,
        tools=AGENT_TOOLS,  # type: ignore[arg-type]
        store=False,
    )
    assert [t.type for t in first.tools] == ["function"], "hosted dropped, namespace flattened"
    call = next(item for item in first.output if item.type == "function_call")
    assert (call.namespace, call.name) == ("weather", "get_weather")
    assert json.loads(call.arguments) == {"city": "paris"}
    # Codex replays the whole turn itself (store: false), namespace and all.
    second = client.responses.create(
        model=_model(drop_stack),
        input=[
            {"role": "user", "content": PROMPT},
            call.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
        tools=AGENT_TOOLS,  # type: ignore[arg-type]
        store=False,
    )
    assert second.output_text == "sunny"


def test_streamed_namespaced_call(drop_stack: Stack) -> None:
    body = {"model": _model(drop_stack), "input": PROMPT, "tools": AGENT_TOOLS, "stream": True}
    events = []
    with httpx.stream("POST", f"{drop_stack.base_url}/v1/responses", json=body, timeout=60) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    items = [e["item"] for e in events if e["type"].startswith("response.output_item.")]
    calls = [i for i in items if i["type"] == "function_call"]
    assert calls and all(i["namespace"] == "weather" for i in calls)
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["name"] == "get_weather"


# A top-level tool holding the namespaced function's own name: the model sees that one as
# `get_weather` and the namespaced one as `weather__get_weather`.
CLASHING_TOOLS = [{**WEATHER, "description": "Weather at sea."}, *AGENT_TOOLS]


@pytest.mark.parametrize(
    ("tools", "choice", "namespace"),
    [
        (AGENT_TOOLS, {"type": "function", "name": "weather__get_weather"}, "weather"),
        (AGENT_TOOLS, {"type": "function", "name": "get_weather"}, "weather"),
        (CLASHING_TOOLS, {"type": "function", "name": "weather__get_weather"}, "weather"),
        (CLASHING_TOOLS, {"type": "function", "name": "get_weather"}, None),
        (
            AGENT_TOOLS,
            {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [{"type": "function", "name": "weather__get_weather"}],
            },
            "weather",
        ),
    ],
    ids=["qualified", "own-name", "qualified-clash", "own-name-clash", "allowed-qualified"],
)
def test_a_forced_namespaced_call_comes_back_namespaced(
    drop_stack: Stack, tools: list[Any], choice: dict[str, Any], namespace: str | None
) -> None:
    client = openai.OpenAI(base_url=f"{drop_stack.base_url}/v1", api_key="x", max_retries=0)
    reply = client.responses.create(
        model=_model(drop_stack),
        input="Reply with: hello",  # answered with text when the choice is free
        tools=tools,
        tool_choice=choice,  # type: ignore[arg-type]
        max_output_tokens=200,
        store=False,
    )
    calls = [item for item in reply.output if item.type == "function_call"]
    assert calls, reply.output
    assert all((c.namespace, c.name) == (namespace, "get_weather") for c in calls)
    assert all(set(json.loads(c.arguments)) == {"city"} for c in calls)


def test_a_choice_naming_an_unknown_namespaced_function_is_refused(drop_stack: Stack) -> None:
    body = {
        "model": _model(drop_stack),
        "input": "hello",
        "tools": AGENT_TOOLS,
        "tool_choice": {"type": "function", "name": "climate__get_weather"},
    }
    reply = httpx.post(f"{drop_stack.base_url}/v1/responses", json=body, timeout=60)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "tool_choice"


def _grpc_params(stack: Stack, *tools: pb.Tool) -> gen.CountInputTokensRequest:
    text = pb.ContentPart(input_text=pb.InputText(text=PROMPT))
    params = pb.CreateResponseParams(
        model=_model(stack),
        input=[pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[text]))],
        tools=list(tools),
    )
    return gen.CountInputTokensRequest(params=params)


def test_grpc_clients_get_the_same_policy(stack: Stack, drop_stack: Stack) -> None:
    hosted = pb.Tool(hosted=pb.HostedTool(type="web_search"))
    weather = pb.Tool(function=pb.FunctionTool(name="get_weather", parameters_json="{}"))
    namespace = pb.Tool(namespace=pb.NamespaceTool(name="weather", tools=[weather]))
    with grpc.insecure_channel(stack.grpc_address) as channel:
        stub = gen_grpc.GenerationServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.CountInputTokens(_grpc_params(stack, hosted))
    status = rpc_status.from_call(caught.value)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.metadata["param"], info.metadata["code"]) == ("tools[0].type", "unsupported_tool")
    with grpc.insecure_channel(drop_stack.grpc_address) as channel:
        stub = gen_grpc.GenerationServiceStub(channel)
        flat = stub.CountInputTokens(_grpc_params(drop_stack, hosted, namespace)).input_tokens
        plain = stub.CountInputTokens(_grpc_params(drop_stack, weather)).input_tokens
    assert flat == plain, "the namespace renders as its own function tool"


PENALTIES = {"presence_penalty": 0.5, "frequency_penalty": -0.25}


def test_penalties_are_echoed_everywhere(stack: Stack) -> None:
    base = {"model": _model(stack), "input": "Reply with: hello", "max_output_tokens": 8}
    url = f"{stack.base_url}/v1/responses"
    plain = httpx.post(url, json=base, timeout=60).json()
    assert (plain["presence_penalty"], plain["frequency_penalty"]) == (0.0, 0.0)
    sync = httpx.post(url, json={**base, **PENALTIES}, timeout=60).json()
    assert {k: sync[k] for k in PENALTIES} == PENALTIES
    with httpx.stream("POST", url, json={**base, **PENALTIES, "stream": True}, timeout=60) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    snapshots = [e["response"] for e in events if "response" in e]
    assert len(snapshots) >= 3
    assert all({k: s[k] for k in PENALTIES} == PENALTIES for s in snapshots)
    queued = httpx.post(url, json={**base, **PENALTIES, "background": True}, timeout=60).json()
    assert {k: queued[k] for k in PENALTIES} == PENALTIES
    polled = httpx.get(f"{url}/{queued['id']}", timeout=60).json()
    assert {k: polled[k] for k in PENALTIES} == PENALTIES


@pytest.mark.parametrize("name", ["presence_penalty", "frequency_penalty"])
@pytest.mark.parametrize("value", [2.5, -2.01])
def test_penalties_out_of_range_are_refused(stack: Stack, name: str, value: float) -> None:
    body = {"model": _model(stack), "input": "x", name: value}
    reply = httpx.post(f"{stack.base_url}/v1/responses", json=body, timeout=60)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["param"], error["code"]) == (name, "invalid_value")


def test_a_penalty_changes_what_is_sampled(random_stack: Stack) -> None:
    # The random model decodes greedily into repeats; a strong frequency penalty breaks them.
    body = {
        "model": _model(random_stack),
        "input": "hello",
        "max_output_tokens": 24,
        "temperature": 0,
    }
    url = f"{random_stack.base_url}/v1/responses"
    plain = httpx.post(url, json=body, timeout=60).json()
    again = httpx.post(url, json=body, timeout=60).json()
    assert again["output"][-1]["content"] == plain["output"][-1]["content"], "greedy repeats"
    penalised = httpx.post(url, json={**body, "frequency_penalty": 2.0}, timeout=60).json()
    assert plain["output"] and penalised["output"]
    assert json.dumps(plain["output"][-1]["content"]) != json.dumps(
        penalised["output"][-1]["content"]
    )


def test_compact_takes_agent_tools_under_drop(stack: Stack, drop_stack: Stack) -> None:
    # Codex asks for remote compaction with the same tools it sends on every turn.
    body = {
        "input": [
            {"role": role, "content": text}
            for w in ("rain", "snow", "wind", "sun", "cloud", "storm", "moon", "star")
            for role, text in (("user", f"Reply with: {w}"), ("assistant", w))
        ]
        + [{"role": "user", "content": "Reply with: hello"}],
        "tools": [WEATHER, *AGENT_TOOLS],
        "keep_tokens": 40,
        "max_output_tokens": 4,
    }
    dropped = httpx.post(
        f"{drop_stack.base_url}/v1/responses/compact",
        json={**body, "model": _model(drop_stack)},
        timeout=60,
    )
    assert dropped.status_code == 200, dropped.text
    assert dropped.json()["output"][-1]["type"] == "compaction"
    refused = httpx.post(
        f"{stack.base_url}/v1/responses/compact", json={**body, "model": _model(stack)}, timeout=60
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "tools[1].type"
