"""Images in, through mlx-vlm, on a tiny random-weight Qwen2-VL (tests/support/random_vlm.py).

The real stack (façade -> gRPC -> core -> the VLM's engine thread), driven with the OpenAI SDK.
"""

from __future__ import annotations

import base64
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

pytest.importorskip("mlx_vlm")
from mlx_responses.service.responses.remote_media import RemoteMedia
from PIL import Image

from tests.support.media_server import serving
from tests.support.random_vlm import (
    MAX_MEDIA_BYTES,
    MAX_PIXELS,
    PATCH,
)
from tests.support.stack import Stack

# A random model runs to max_output_tokens (incomplete) unless it draws its end token.
DONE = ("completed", "incomplete")


def _png(width: int, height: int, color: tuple[int, int, int], fmt: str = "PNG") -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format=fmt)
    mime = {"PNG": "png", "JPEG": "jpeg", "WEBP": "webp", "GIF": "gif"}[fmt]
    return f"data:image/{mime};base64,{base64.b64encode(buffer.getvalue()).decode()}"


def _input(url: str, text: str = "What is in the image?", **image: Any) -> list[dict[str, Any]]:
    part = {"type": "input_image", "image_url": url, **image}
    return [{"role": "user", "content": [{"type": "input_text", "text": text}, part]}]


def _client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def _image_tokens(width: int, height: int) -> int:
    """Tokens the tiny VLM's processor gives an image that needs no resize (28-px blocks)."""
    return (width // (PATCH * 2)) * (height // (PATCH * 2))


def _metric(stack: Stack, name: str) -> float:
    text = httpx.get(f"{stack.base_url}/metrics", timeout=30).text
    match = re.search(rf"^mlx_responses_{name}(?:_total)?\{{[^}}]*\}} (\S+)$", text, re.M)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def test_sync_image_answer(vlm_stack: Stack) -> None:
    client = _client(vlm_stack)
    for fmt in ("PNG", "JPEG", "WEBP", "GIF"):
        resp = client.responses.create(
            model=_model(vlm_stack),
            input=_input(_png(56, 56, (200, 30, 30), fmt)),  # type: ignore[arg-type]
            max_output_tokens=4,
            temperature=0,
        )
        assert resp.status in DONE, fmt
        assert resp.usage is not None and resp.usage.output_tokens >= 1
        assert resp.usage.input_tokens > _image_tokens(56, 56)


def test_stream_image_answer(vlm_stack: Stack) -> None:
    client = _client(vlm_stack)
    events = list(
        client.responses.create(
            model=_model(vlm_stack),
            input=_input(_png(84, 56, (10, 200, 10))),  # type: ignore[arg-type]
            max_output_tokens=4,
            temperature=0,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert "response.output_text.delta" in kinds
    final = events[-1].response  # type: ignore[union-attr]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    assert final.output_text == deltas


def test_pixels_reach_the_model(vlm_stack: Stack) -> None:
    """Same text, same image size, other pixels: other log probabilities for the first token."""
    client = _client(vlm_stack)
    first = []
    for color in ((255, 0, 0), (0, 0, 255), (255, 0, 0)):
        resp = client.responses.create(
            model=_model(vlm_stack),
            input=_input(_png(112, 112, color)),  # type: ignore[arg-type]
            max_output_tokens=1,
            temperature=0,
            top_logprobs=3,
            include=["message.output_text.logprobs"],
        )
        logprobs = resp.output[0].content[0].logprobs  # type: ignore[union-attr]
        assert logprobs and len(logprobs[0].top_logprobs) == 3
        first.append([(t.token, round(t.logprob, 4)) for t in logprobs[0].top_logprobs])
    assert first[0] == first[2]  # the same image (a cache hit, too) reads the same
    assert first[0] != first[1]


def test_input_tokens_count_image_tokens(vlm_stack: Stack) -> None:
    model = _model(vlm_stack)

    def count(width: int, height: int, **image: Any) -> int:
        reply = httpx.post(
            f"{vlm_stack.base_url}/v1/responses/input_tokens",
            json={"model": model, "input": _input(_png(width, height, (1, 2, 3)), **image)},
            timeout=60,
        )
        assert reply.status_code == 200, reply.text
        return int(reply.json()["input_tokens"])

    small, large = count(28, 28), count(112, 112)
    assert large - small == _image_tokens(112, 112) - _image_tokens(28, 28) == 15
    # Beyond the processor's max_pixels the image is resized down to it: 16 tokens at most.
    assert count(1000, 200) - small <= MAX_PIXELS // (PATCH * 2) ** 2 - 1
    resp = _client(vlm_stack).responses.create(
        model=model,
        input=_input(_png(112, 112, (1, 2, 3))),
        max_output_tokens=1,  # type: ignore[arg-type]
    )
    assert resp.usage is not None and resp.usage.input_tokens == large


def _refusal(stack: Stack, content: list[dict[str, Any]]) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        _client(stack).responses.create(
            model=_model(stack),
            input=[{"role": "user", "content": content}],  # type: ignore[arg-type,misc,list-item]
            max_output_tokens=2,
        )
    body = caught.value.body
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize(
    ("part", "param", "code"),
    [
        ({"image_url": "data:image/png;base64,aGVsbG8="}, "input[0].content[1]", "invalid_image"),
        (
            {"image_url": "data:image/png;base64,@@@"},
            "input[0].content[1].image_url",
            "invalid_base64",
        ),
        (
            {"image_url": "https://example.com/a.png"},
            "input[0].content[1].image_url",
            "unsupported_value",
        ),
        ({"file_id": "file-123"}, "input[0].content[1].file_id", "unsupported_value"),
        (
            {"image_url": "data:text/plain;base64,aGVsbG8="},
            "input[0].content[1]",
            "unsupported_media_type",
        ),
    ],
)
def test_bad_image_is_a_400_naming_the_part(
    vlm_stack: Stack, part: dict[str, Any], param: str, code: str
) -> None:
    body = _refusal(
        vlm_stack, [{"type": "input_text", "text": "x"}, {"type": "input_image", **part}]
    )
    assert body["param"] == param and body["code"] == code, body


def test_oversized_images_are_400s(vlm_stack: Stack) -> None:
    noise = Image.frombytes("RGB", (200, 200), bytes(range(256)) * 468 + bytes(192))
    buffer = io.BytesIO()
    noise.save(buffer, format="PNG", compress_level=0)
    assert len(buffer.getvalue()) > MAX_MEDIA_BYTES
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    body = _refusal(vlm_stack, [{"type": "input_image", "image_url": url}])
    assert body["param"] == "input[0].content[0].image_url" and body["code"] == "media_too_large"
    wide = _png(2048, 256, (0, 0, 0))  # small bytes, too many pixels
    body = _refusal(vlm_stack, [{"type": "input_image", "image_url": wide}])
    assert body["param"] == "input[0].content[0]" and body["code"] == "image_too_large"


def test_pdf_file_is_refused(vlm_stack: Stack) -> None:
    pdf = base64.b64encode(b"%PDF-1.4\n%%EOF\n").decode()
    body = _refusal(vlm_stack, [{"type": "input_file", "file_data": pdf, "filename": "a.pdf"}])
    assert body["param"] == "input[0].content[0].file_data" and body["code"] == "unsupported_file"


def test_image_as_input_file(vlm_stack: Stack) -> None:
    data = _png(56, 28, (9, 9, 9))
    resp = _client(vlm_stack).responses.create(
        model=_model(vlm_stack),
        input=[
            {
                "role": "user",
                "content": [{"type": "input_file", "file_data": data, "filename": "a.png"}],
            }
        ],  # type: ignore[arg-type,misc,list-item]
        max_output_tokens=2,
    )
    assert resp.status in DONE


def test_background_bad_image_fails_invalid_prompt(vlm_stack: Stack) -> None:
    client = _client(vlm_stack)
    queued = client.responses.create(
        model=_model(vlm_stack),
        input=_input("data:image/png;base64,aGVsbG8="),  # type: ignore[arg-type]
        background=True,
        max_output_tokens=2,
    )
    assert queued.status in ("queued", "in_progress", "failed")
    deadline = time.monotonic() + 60
    final = queued
    while final.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.05)
        final = client.responses.retrieve(queued.id)
    assert final.status == "failed"
    assert final.error is not None and final.error.code == "invalid_prompt"
    # The message names the part (a failed response has no `param`), and no Python object.
    assert final.error.message.startswith("input[0].content[1]: "), final.error.message
    assert "0x" not in final.error.message
    good = client.responses.create(
        model=_model(vlm_stack),
        input=_input(_png(28, 28, (5, 5, 5))),  # type: ignore[arg-type]
        background=True,
        max_output_tokens=2,
    )
    while good.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.05)
        good = client.responses.retrieve(good.id)
    assert good.status in DONE


def test_resent_image_hits_the_encoding_cache(vlm_stack: Stack) -> None:
    """The same image after other text is encoded once; the same prompt again is read from
    the prompt cache, its image included (no encoding at all)."""
    client = _client(vlm_stack)
    url = _png(112, 84, (123, 45, 67))
    hits, misses = (
        _metric(vlm_stack, "image_encoding_cache_hits"),
        _metric(vlm_stack, "image_encoding_cache_misses"),
    )
    answers = []
    for text in ("What is in the image?", "Describe the image.", "Describe the image."):
        resp = client.responses.create(
            model=_model(vlm_stack),
            input=_input(url, text),
            max_output_tokens=6,
            temperature=0,  # type: ignore[arg-type]
        )
        answers.append(resp.output_text)
    assert _metric(vlm_stack, "image_encoding_cache_misses") == misses + 1
    assert _metric(vlm_stack, "image_encoding_cache_hits") == hits + 1
    assert answers[2] == answers[1]  # the prompt cache generates what an encoding hit does
    assert _metric(vlm_stack, "image_encoding_cache_bytes") > 0  # the image's encoding


def test_text_model_refuses_images(stack: Stack) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _client(stack).responses.create(
            model=_model(stack),
            input=_input(_png(28, 28, (0, 0, 0))),
            max_output_tokens=2,  # type: ignore[arg-type]
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["param"] == "input[0].content[1].type" and body["code"] == "unsupported_content"


def test_vision_runtime_path_is_used(vlm_stack: Stack) -> None:
    from mlx_responses.service.models.vision_runtime import VisionRuntime

    assert vlm_stack.core is not None
    assert isinstance(vlm_stack.core.models.default.runtime, VisionRuntime)
    assert Path(vlm_stack.settings.models[0]).name == "tiny-vlm"


def test_json_schema_grammar_holds_for_an_image_request(vlm_stack: Stack) -> None:
    schema = {
        "type": "object",
        "properties": {"color": {"type": "string", "enum": ["red", "blue"]}},
        "required": ["color"],
        "additionalProperties": False,
    }
    resp = _client(vlm_stack).responses.create(
        model=_model(vlm_stack),
        input=_input(_png(56, 56, (255, 0, 0))),  # type: ignore[arg-type]
        max_output_tokens=40,
        temperature=0,
        text={"format": {"type": "json_schema", "name": "c", "schema": schema, "strict": True}},
    )
    assert resp.status == "completed", resp.output_text
    assert json.loads(resp.output_text)["color"] in ("red", "blue")


def _png_bytes(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (40, 80, 120)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def remote_media(vlm_stack: Stack) -> Iterator[type[RemoteMedia]]:
    """--allow-remote-media on the running stack (its flag builds the same object)."""
    assert vlm_stack.core is not None
    pipeline = vlm_stack.core.pipeline
    before = pipeline.remote_media
    yield RemoteMedia
    pipeline.remote_media = before


def _allow(stack: Stack, media: RemoteMedia) -> None:
    assert stack.core is not None
    stack.core.pipeline.remote_media = media


def test_remote_media_is_off_by_default(vlm_stack: Stack) -> None:
    with serving(_png_bytes(28, 28)) as base:
        body = _refusal(vlm_stack, [{"type": "input_image", "image_url": f"{base}/image.png"}])
    assert body["code"] == "unsupported_value" and "--allow-remote-media" in body["message"]


def test_remote_media_refuses_loopback(vlm_stack: Stack, remote_media: type[RemoteMedia]) -> None:
    _allow(vlm_stack, remote_media(MAX_MEDIA_BYTES, 5.0))  # public addresses only: the flag's
    with serving(_png_bytes(28, 28)) as base:
        for host in (base, base.replace("127.0.0.1", "localhost")):
            url = f"{host}/image.png"
            body = _refusal(vlm_stack, [{"type": "input_image", "image_url": url}])
            assert body["param"] == "input[0].content[0].image_url"
            assert body["code"] == "invalid_image_url" and "not a public address" in body["message"]


def test_remote_media_fetched_within_bounds(
    vlm_stack: Stack, remote_media: type[RemoteMedia]
) -> None:
    # The address check off (a test server is on loopback); every other bound as the flag sets.
    _allow(vlm_stack, remote_media(MAX_MEDIA_BYTES, 1.0, public_only=False))
    client = _client(vlm_stack)
    with serving(_png_bytes(56, 56)) as base:
        resp = client.responses.create(
            model=_model(vlm_stack),
            input=_input(f"{base}/image.png"),  # type: ignore[arg-type]
            max_output_tokens=2,
        )
        assert resp.status in DONE
        assert resp.usage is not None and resp.usage.input_tokens > _image_tokens(56, 56)
        for path, code in (
            ("/redirect", "invalid_image_url"),
            ("/large", "media_too_large"),
            ("/slow", "invalid_image_url"),
            ("/missing", "invalid_image_url"),
        ):
            body = _refusal(vlm_stack, [{"type": "input_image", "image_url": f"{base}{path}"}])
            assert body["code"] == code, (path, body)
            assert body["param"] == "input[0].content[0].image_url"
