"""`--hosted-tools`: hosted tools refused or dropped, namespaces flattened, calls mapped back."""

from __future__ import annotations

import itertools
import logging

import pytest
from mlx_responses.http_facade.responses.from_proto import event_to_json
from mlx_responses.http_facade.responses.to_proto import params_from_json
from mlx_responses.service.errors import ServiceError
from mlx_responses.service.responses.events import EventAssembler
from mlx_responses.service.responses.tool_policy import HostedToolPolicy, qualified_name

from mlx_responses.v1 import responses_pb2 as pb


def _fn(name: str) -> dict[str, object]:
    return {"type": "function", "name": name, "parameters": {"type": "object"}}


def _params(*tools: dict[str, object]) -> pb.CreateResponseParams:
    return params_from_json({"model": "m", "input": "hi", "tools": list(tools)})


AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [_fn("spawn_agent"), _fn("close_agent")],
}


def test_function_tools_pass_untouched() -> None:
    params = _params(_fn("a"))
    assert HostedToolPolicy("reject").resolve(params).params is params


@pytest.mark.parametrize(
    ("tools", "param"),
    [
        ((_fn("a"), {"type": "web_search"}), "tools[1].type"),
        ((AGENTS,), "tools[0].type"),
    ],
)
def test_reject_mode_refuses_hosted_and_namespace_tools(
    tools: tuple[dict[str, object], ...], param: str
) -> None:
    with pytest.raises(ServiceError) as caught:
        HostedToolPolicy("reject").resolve(_params(*tools))
    assert (caught.value.param, caught.value.code) == (param, "unsupported_tool")
    assert "--hosted-tools drop" in caught.value.message


def test_drop_mode_drops_hosted_and_flattens_namespaces(caplog: pytest.LogCaptureFixture) -> None:
    policy = HostedToolPolicy("drop")
    params = _params(
        _fn("exec_command"), {"type": "web_search", "external_web_access": False}, AGENTS
    )
    with caplog.at_level(logging.INFO, logger="mlx_responses.service.responses.tool_policy"):
        resolved = policy.resolve(params)
        policy.resolve(params)  # a second request logs nothing new
    names = [t.function.name for t in resolved.params.tools]
    assert names == ["exec_command", "spawn_agent", "close_agent"]
    assert resolved.params.tools[1].function.description == "Sub-agents."
    assert resolved.namespaced["spawn_agent"] == ("multi_agent_v1", "spawn_agent")
    assert resolved.namespaced["multi_agent_v1__close_agent"] == ("multi_agent_v1", "close_agent")
    dropped = [r for r in caplog.records if "web_search" in r.getMessage()]
    assert len(dropped) == 1
    assert len(params.tools) == 3, "the request itself is left alone"


def test_a_name_clash_falls_back_to_the_qualified_name() -> None:
    resolved = HostedToolPolicy("drop").resolve(_params(_fn("close_agent"), AGENTS))
    names = [t.function.name for t in resolved.params.tools]
    assert names == ["close_agent", "spawn_agent", "multi_agent_v1__close_agent"]
    assert "close_agent" not in resolved.namespaced  # the top-level function keeps its name
    assert resolved.namespaced["multi_agent_v1__close_agent"] == ("multi_agent_v1", "close_agent")


def test_hosted_tools_inside_a_namespace_are_dropped_too() -> None:
    ns = {"type": "namespace", "name": "mcp__x__", "tools": [{"type": "web_search"}, _fn("f")]}
    resolved = HostedToolPolicy("drop").resolve(_params(ns))
    assert [t.function.name for t in resolved.params.tools] == ["f"]
    assert resolved.namespaced["mcp__x__f"] == ("mcp__x__", "f")


def test_qualified_names_follow_codex() -> None:
    assert qualified_name("mcp__server__", "tool") == "mcp__server__tool"
    assert qualified_name("crm", "lookup") == "crm__lookup"


def test_calls_of_flattened_tools_leave_with_their_namespace() -> None:
    counter = itertools.count()
    assembler = EventAssembler(
        pb.Response(id="resp_1"),
        ids=lambda prefix: f"{prefix}_{next(counter)}",
        namespaced={"spawn_agent": ("multi_agent_v1", "spawn_agent")},
    )
    events = assembler.start() + assembler.function_call("spawn_agent", "{}")
    events += assembler.function_call("other", "{}")
    events += assembler.finish(pb.RESPONSE_STATUS_COMPLETED, pb.Usage(), 1)
    added = [event_to_json(e) for e in events if e.WhichOneof("payload") == "output_item"]
    assert added[0]["item"]["namespace"] == "multi_agent_v1"
    assert added[0]["item"]["name"] == "spawn_agent"
    assert "namespace" not in added[-1]["item"]
    final = event_to_json(events[-1])["response"]["output"]
    assert [c.get("namespace") for c in final] == ["multi_agent_v1", None]
