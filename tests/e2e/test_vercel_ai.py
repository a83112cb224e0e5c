"""The Vercel AI SDK (npm `ai` + `@ai-sdk/openai`) through a multi-step tool turn after
reasoning: its second step replays the reasoning and the call as `item_reference` items, and its
reasoning text comes from the `summary` (`reasoning.summary`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
# Installed by `make setup` (tools/setup.sh) when npm reaches the registry.
NODE_MODULES = ROOT / ".tools" / "node_modules"
SCRIPT = Path(__file__).with_name("vercel_ai_tool_turn.mjs")


def _run(stack: Stack) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the Vercel AI SDK test needs Node.js and npm")
    for package in ("ai", "@ai-sdk/openai", "zod"):
        if not (NODE_MODULES / package / "package.json").exists():
            pytest.skip(
                f"npm package {package} is not in .tools (`make setup` installs it when npm "
                "reaches the registry)"
            )
    # ESM resolves bare imports from the script's own folder up (not NODE_PATH): run a copy
    # inside .tools, beside its node_modules.
    script = NODE_MODULES.parent / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    env = {
        **os.environ,
        "BASE_URL": f"{stack.base_url}/v1",
        "MODEL": stack.settings.models[0].name,
    }
    done = subprocess.run(
        [node, str(script)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_vercel_ai_sdk_multi_step_tool_turn_after_reasoning(each_store_stack: Stack) -> None:
    out = _run(each_store_stack)
    first, second = out["steps"][0], out["steps"][1]
    # Step 1: the model reasoned (the SDK reads only `summary`), then called the tool.
    assert first["reasoningText"], out
    assert first["toolCalls"] == [{"name": "get_weather", "input": {"city": "paris"}}]
    assert first["toolResults"] == ["sunny"]
    # Step 2 replayed step 1 by reference and answered from the tool's result.
    requests = out["requests"]
    assert all(r["error"] is None for r in requests), requests
    assert requests[0]["reasoning"] == {"summary": "auto"}
    replayed = requests[1]["input"]
    references = [i["id"] for i in replayed if i.get("type") == "item_reference"]
    assert any(ref.startswith("rs_") for ref in references), replayed
    assert any(i.get("type") == "function_call_output" for i in replayed), replayed
    assert second["text"] == "sunny" and out["text"] == "sunny"
