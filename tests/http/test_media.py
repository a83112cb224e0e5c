"""`--media`: an agent's history with images, against the text-only bundled model."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack

PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwAB"
    "BAEAwS2OUAAAAABJRU5ErkJggg=="
)
HISTORY: list[Any] = [
    {"role": "user", "content": "Show me the chart."},
    {"type": "function_call", "call_id": "call_1", "name": "view_image", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "shown"},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Reply with: hello"},
            {"type": "input_image", "image_url": PNG, "detail": "auto"},
        ],
    },
]
WITH_PLACEHOLDER: list[Any] = [
    *HISTORY[:3],
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Reply with: hello"},
            {"type": "input_text", "text": "[image omitted: this model has no vision]"},
        ],
    },
]


def _post(stack: Stack, path: str, **body: Any) -> httpx.Response:
    body.setdefault("model", stack.settings.models[0].name)
    return httpx.post(f"{stack.base_url}/v1/responses{path}", json=body, timeout=60)


def test_reject_keeps_the_seed_400(stack: Stack) -> None:
    assert stack.settings.media == "reject"
    for path in ("", "/input_tokens", "/compact"):
        response = _post(stack, path, input=HISTORY)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == "input[3].content[1].type"
        assert error["code"] == "unsupported_content"


@pytest.fixture(scope="module")
def dropping(model_path: Any) -> Any:
    with Stack.running(model_path, media="drop") as stack:
        yield stack


def test_drop_renders_a_placeholder_in_place(dropping: Stack) -> None:
    counted = _post(dropping, "/input_tokens", input=HISTORY)
    assert counted.status_code == 200, counted.text
    expected = _post(dropping, "/input_tokens", input=WITH_PLACEHOLDER).json()["input_tokens"]
    assert counted.json()["input_tokens"] == expected


def test_drop_lets_the_agent_turn_go_on(dropping: Stack) -> None:
    client = openai.OpenAI(base_url=f"{dropping.base_url}/v1", api_key="x", max_retries=0)
    first = client.responses.create(
        model=dropping.settings.models[0].name, input=HISTORY, max_output_tokens=20
    )
    # Generated, not refused (what the model answers is the model's: not checked here).
    assert first.status in ("completed", "incomplete") and first.error is None
    placeholder = _post(dropping, "/input_tokens", input=WITH_PLACEHOLDER).json()["input_tokens"]
    assert first.usage is not None and first.usage.input_tokens == placeholder
    # The stored history holds the placeholder: the next turn chains on it.
    second = client.responses.create(
        model=dropping.settings.models[0].name,
        previous_response_id=first.id,
        input=[{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}],
        max_output_tokens=20,
    )
    assert second.status in ("completed", "incomplete") and second.error is None
    assert second.usage is not None and second.usage.input_tokens > placeholder
