"""Images on /v1/chat/completions and /v1/messages, on the tiny random Qwen2-VL.

The requests are the recorded client shapes of tests/fixtures/vision_requests.json (Open WebUI's
chat payload, the Anthropic SDK's messages.create): each is answered, counted as the equivalent
/v1/responses request is, and its refusals name the part in the dialect's own terms.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.responses.remote_media import RemoteMedia

from tests.http.test_vision import (
    MAX_MEDIA_BYTES,
    _image_tokens,
    _metric,
    _png,
    _png_bytes,
)
from tests.support.media_server import serving
from tests.support.stack import Stack

FIXTURES = json.loads((Path(__file__).parents[1] / "fixtures" / "vision_requests.json").read_text())
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def _fixture(stack: Stack, name: str, media_base: str = "") -> dict[str, Any]:
    text = json.dumps(FIXTURES[name]).replace("MEDIA_BASE", media_base)
    body: dict[str, Any] = json.loads(text)
    body["model"] = stack.settings.models[0].name
    return body


def _post(stack: Stack, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{stack.base_url}{path}", json=body, headers=ANTHROPIC, timeout=120)


def _responses_input_tokens(stack: Stack, content: list[dict[str, Any]]) -> int:
    """What /v1/responses counts for the same user message (and what it bills)."""
    body = {"model": stack.settings.models[0].name, "input": [{"role": "user", "content": content}]}
    counted = _post(stack, "/v1/responses/input_tokens", body)
    assert counted.status_code == 200, counted.text
    answered = _post(stack, "/v1/responses", {**body, "max_output_tokens": 1, "store": False})
    assert answered.status_code == 200, answered.text
    assert answered.json()["usage"]["input_tokens"] == counted.json()["input_tokens"]
    return int(counted.json()["input_tokens"])


def _chat_as_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    parts = body["messages"][0]["content"]
    return [
        {"type": "input_text", "text": parts[0]["text"]},
        {"type": "input_image", "image_url": parts[1]["image_url"]["url"]},
    ]


def _messages_as_responses(body: dict[str, Any], url: str) -> list[dict[str, Any]]:
    text = body["messages"][0]["content"][1]["text"]
    return [{"type": "input_image", "image_url": url}, {"type": "input_text", "text": text}]


def _encodings(stack: Stack) -> float:
    """Images encoded or read from the image-encoding cache so far."""
    return _metric(stack, "image_encoding_cache_hits") + _metric(
        stack, "image_encoding_cache_misses"
    )


def test_open_webui_chat_image_is_answered_and_counted(vlm_stack: Stack) -> None:
    body = {**_fixture(vlm_stack, "open_webui_chat"), "max_tokens": 3, "temperature": 0}
    first = _post(vlm_stack, "/v1/chat/completions", body)
    assert first.status_code == 200, first.text
    usage = first.json()["usage"]
    assert usage["completion_tokens"] >= 1
    assert usage["prompt_tokens"] > _image_tokens(56, 56)
    assert usage["prompt_tokens"] == _responses_input_tokens(vlm_stack, _chat_as_responses(body))
    encoded = _encodings(vlm_stack)
    again = _post(vlm_stack, "/v1/chat/completions", body)
    assert again.status_code == 200, again.text
    assert again.json()["usage"]["prompt_tokens"] == usage["prompt_tokens"]
    assert again.json()["choices"][0]["message"] == first.json()["choices"][0]["message"]
    # The resent prompt, its image included, is read from the prompt cache (all but its last
    # token: the step that feeds it gives the first logits): its image is not encoded again.
    assert _encodings(vlm_stack) == encoded
    cached = again.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == usage["prompt_tokens"] - 1


def test_open_webui_streamed_chat_image(vlm_stack: Stack) -> None:
    body = {**_fixture(vlm_stack, "open_webui_chat_stream"), "max_tokens": 3, "temperature": 0}
    url = f"{vlm_stack.base_url}/v1/chat/completions"
    with httpx.stream("POST", url, json=body, timeout=120) as r:
        assert r.status_code == 200
        frames = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert all("error" not in c for c in chunks), chunks
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    whole = _post(vlm_stack, "/v1/chat/completions", {**body, "stream": False}).json()
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["usage"]["prompt_tokens"] == whole["usage"]["prompt_tokens"]


def test_anthropic_sdk_base64_image(vlm_stack: Stack) -> None:
    anthropic = pytest.importorskip("anthropic")
    body = _fixture(vlm_stack, "anthropic_sdk_base64")
    client = anthropic.Anthropic(base_url=vlm_stack.base_url, api_key="x", max_retries=0)
    message = client.messages.create(**body)
    counted = client.messages.count_tokens(model=body["model"], messages=body["messages"])
    billed = (
        message.usage.input_tokens
        + (message.usage.cache_read_input_tokens or 0)
        + (message.usage.cache_creation_input_tokens or 0)
    )
    assert message.usage.output_tokens >= 1 and message.content
    assert counted.input_tokens == billed > _image_tokens(56, 56)
    # No cache_control: nothing counts as written at the client's request; what was not read
    # is input (it reported input_tokens 0 and all of it as cache_creation_input_tokens).
    assert not message.usage.cache_creation_input_tokens
    assert message.usage.input_tokens == billed - (message.usage.cache_read_input_tokens or 0)
    source = body["messages"][0]["content"][0]["source"]
    url = f"data:{source['media_type']};base64,{source['data']}"
    assert billed == _responses_input_tokens(vlm_stack, _messages_as_responses(body, url))
    encoded = _encodings(vlm_stack)
    again = client.messages.create(**body)
    usage = again.usage
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    assert usage.input_tokens + read + written == billed and read > _image_tokens(56, 56)
    assert written == 0
    assert _encodings(vlm_stack) == encoded  # its image came with the cached prefix


@pytest.fixture
def remote_media(vlm_stack: Stack) -> Iterator[None]:
    """--allow-remote-media on the running stack, loopback allowed (the media server's)."""
    assert vlm_stack.core is not None
    pipeline = vlm_stack.core.pipeline
    before = pipeline.remote_media
    pipeline.remote_media = RemoteMedia(MAX_MEDIA_BYTES, 1.0, public_only=False)
    yield
    pipeline.remote_media = before


def test_anthropic_sdk_url_image(vlm_stack: Stack, remote_media: None) -> None:
    with serving(_png_bytes(56, 56)) as base:
        body = _fixture(vlm_stack, "anthropic_sdk_url", base)
        reply = _post(vlm_stack, "/v1/messages", body)
        assert reply.status_code == 200, reply.text
        usage = reply.json()["usage"]
        billed = sum(
            usage[k]
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        counted = _post(vlm_stack, "/v1/messages/count_tokens", body)
        assert counted.json() == {"input_tokens": billed}
        url = f"{base}/image.png"
        assert billed == _responses_input_tokens(vlm_stack, _messages_as_responses(body, url))
        missing = copy.deepcopy(body)
        missing["messages"][0]["content"][0]["source"]["url"] = f"{base}/missing"
        refused = _post(vlm_stack, "/v1/messages", missing)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("messages[0].content[0].source.url: ")


def test_remote_url_needs_the_flag(vlm_stack: Stack) -> None:
    body = _fixture(vlm_stack, "anthropic_sdk_url", "https://example.com")
    reply = _post(vlm_stack, "/v1/messages", body)
    assert reply.status_code == 400 and reply.json()["type"] == "error"
    message = reply.json()["error"]["message"]
    assert (
        message.startswith("messages[0].content[0].source.url: ")
        and "--allow-remote-media" in message
    )
    chat = _fixture(vlm_stack, "open_webui_chat")
    chat["messages"][0]["content"][1]["image_url"] = "https://example.com/a.png"  # a bare URL
    error = _post(vlm_stack, "/v1/chat/completions", chat).json()["error"]
    assert error["param"] == "messages[0].content[1].image_url" and "input[" not in error["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_bad_images_are_400s_naming_the_part(vlm_stack: Stack, stream: bool) -> None:
    chat = _fixture(vlm_stack, "open_webui_chat")
    chat["stream"] = stream
    chat["messages"].insert(0, {"role": "system", "content": "Be brief."})
    chat["messages"][1]["content"][1]["image_url"]["url"] = "data:image/png;base64,@@@"
    reply = _post(vlm_stack, "/v1/chat/completions", chat)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == "messages[1].content[1].image_url.url", error
    assert error["code"] == "invalid_base64" and "input[" not in error["message"]
    wide = _png(2048, 256, (0, 0, 0))  # too many pixels
    chat["messages"][1]["content"][1]["image_url"]["url"] = wide
    error = _post(vlm_stack, "/v1/chat/completions", chat).json()["error"]
    assert (error["param"], error["code"]) == ("messages[1].content[1]", "image_too_large")
    body = _fixture(vlm_stack, "anthropic_sdk_base64")
    body["stream"] = stream
    body["messages"][0]["content"].insert(0, {"type": "text", "text": "Look:"})
    body["messages"][0]["content"][1]["source"]["data"] = base64.b64encode(b"hello").decode()
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        reply = _post(vlm_stack, path, body)
        assert reply.status_code == 400, reply.text
        message = reply.json()["error"]["message"]
        assert message.startswith("messages[0].content[1]: ") and "input[" not in message


def test_text_model_refuses_images_in_each_dialect(stack: Stack) -> None:
    body = _fixture(stack, "anthropic_sdk_base64")
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        reply = _post(stack, path, body)
        assert reply.status_code == 400, reply.text
        message = reply.json()["error"]["message"]
        assert message.startswith("messages[0].content[0].type: Content block type 'image'")
    error = _post(stack, "/v1/chat/completions", _fixture(stack, "open_webui_chat")).json()["error"]
    assert error["param"] == "messages[0].content[1].type"
    assert error["message"].startswith("Content part type 'image_url' is not supported")
