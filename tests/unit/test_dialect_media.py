"""Chat `image_url` parts and Anthropic `image` blocks decode to the `input_image` Responses takes,
and the core's errors about them come back named in the dialect's terms (no model)."""

from __future__ import annotations

from typing import Any

import pytest
from mlx_responses.http_facade.anthropic.to_proto import anthropic_media, messages_from_json
from mlx_responses.http_facade.chat.to_proto import chat_from_json
from mlx_responses.http_facade.kit.errors import INVALID_REQUEST, OpenAIError, invalid

from mlx_responses.v1 import responses_pb2 as pb

URL = "data:image/png;base64,iVBORw0KGgo="


def _kinds(item: pb.Item) -> list[str | None]:
    return [p.WhichOneof("part") for p in item.message.content]


def test_chat_image_url_parts_become_input_images() -> None:
    chat = chat_from_json(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "text", "text": "b"},
                        {"type": "image_url", "image_url": {"url": URL, "detail": "low"}},
                        {"type": "image_url", "image_url": "https://example.com/x.png"},
                        {"type": "text", "text": "c"},
                    ],
                },
            ],
        }
    )
    user = chat.params.input[1]
    assert _kinds(user) == ["input_text", "input_image", "input_image", "input_text"]
    assert user.message.content[0].input_text.text == "ab"  # consecutive texts join
    first, second = user.message.content[1].input_image, user.message.content[2].input_image
    assert (first.image_url, first.detail) == (URL, "low")
    assert (second.image_url, second.detail) == ("https://example.com/x.png", "")


@pytest.mark.parametrize(
    ("message", "param"),
    [
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": 1}}]},
            "messages[0].content[0].image_url.url",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": 5}]},
            "messages[0].content[0].image_url",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": URL, "detail": "max"}}],
            },
            "messages[0].content[0].image_url.detail",
        ),
        (
            {"role": "system", "content": [{"type": "image_url", "image_url": {"url": URL}}]},
            "messages[0].content[0].type",
        ),
        (
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
            "messages[0].content[0].type",
        ),
    ],
)
def test_chat_bad_image_parts_name_the_field(message: dict[str, Any], param: str) -> None:
    with pytest.raises(OpenAIError) as refused:
        chat_from_json({"model": "m", "messages": [message]})
    assert refused.value.status == 400 and refused.value.param == param


def _image(source: dict[str, Any]) -> dict[str, Any]:
    return {"type": "image", "source": source}


def _messages(*content: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": list(content)}]}


def test_anthropic_image_blocks_become_input_images() -> None:
    params = messages_from_json(
        _messages(
            {"type": "text", "text": "look"},
            _image({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}),
            _image({"type": "url", "url": "https://example.com/x.png"}),
            {"type": "text", "text": "!"},
        )
    )
    [user] = params.input
    assert _kinds(user) == ["input_text", "input_image", "input_image", "input_text"]
    assert user.message.content[1].input_image.image_url == URL
    assert user.message.content[2].input_image.image_url == "https://example.com/x.png"


@pytest.mark.parametrize(
    ("block", "param"),
    [
        (_image({"type": "base64", "media_type": "image/bmp", "data": ""}), "source.media_type"),
        (_image({"type": "base64", "media_type": "image/png"}), "source.data"),
        (_image({"type": "file", "file_id": "f"}), "source.type"),
        (_image({"type": "url"}), "source.url"),
        ({"type": "image"}, "source"),
        (
            {"type": "tool_result", "tool_use_id": "t", "content": [_image({"type": "url"})]},
            "content[0].type",
        ),
    ],
)
def test_anthropic_bad_image_blocks_name_the_field(block: dict[str, Any], param: str) -> None:
    with pytest.raises(OpenAIError) as refused:
        messages_from_json(_messages(block))
    assert refused.value.param == f"messages[0].content[0].{param}"


def test_core_errors_are_renamed_to_the_dialect_path() -> None:
    media = anthropic_media()
    body = {
        "model": "m",
        "max_tokens": 4,
        "system": "s",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yes"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    _image({"type": "url", "url": "https://a/b.png"}),
                ],
            },
        ],
    }
    params = messages_from_json(body, media=media)
    core = invalid("Bad image.", "input[3].content[1].image_url", "invalid_image_url")
    renamed = media.rename(core, params)
    assert renamed.param == "messages[2].content[1].source.url"
    assert renamed.message == "messages[2].content[1].source.url: Bad image."
    assert renamed.code == "invalid_image_url" and renamed.status == 400
    refusal = OpenAIError(
        INVALID_REQUEST,
        "Content part type 'input_image' is not supported by this text model.",
        param="input[3].content[1].type",
    )
    assert media.rename(refusal, params).message == (
        "messages[2].content[1].type: Content block type 'image' is not supported by this text "
        "model."
    )
    other = invalid("Too long.", "input")  # not about an image: unchanged
    assert media.rename(other, params) is other
