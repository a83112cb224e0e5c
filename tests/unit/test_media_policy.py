"""`--media`: media parts refused with the seed's 400, or replaced by a placeholder once logged."""

from __future__ import annotations

import logging

import pytest
from mlx_responses.http_facade.responses.to_proto import params_from_json
from mlx_responses.service.errors import ServiceError
from mlx_responses.service.responses.media_policy import PLACEHOLDERS, MediaPolicy

from mlx_responses.v1 import responses_pb2 as pb

BODY = {
    "model": "m",
    "input": [
        {"role": "user", "content": "Look:"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "this"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                {"type": "input_file", "file_id": "file_1"},
            ],
        },
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
    ],
}


def test_media_parts_cross_to_the_core_as_their_kind() -> None:
    """Images and files carry their data (a vision model reads them); audio only its kind."""
    params = params_from_json(BODY)
    parts = params.input[1].message.content
    assert [p.WhichOneof("part") for p in parts] == ["input_text", "input_image", "input_file"]
    assert parts[1].input_image.image_url == "data:image/png;base64,AAAA"
    assert parts[2].input_file.file_id == "file_1"
    assert params.input[2].message.content[0].media.type == "input_audio"


def test_a_vision_model_reads_images_and_files_itself() -> None:
    with pytest.raises(ServiceError) as caught:
        MediaPolicy("reject").apply(params_from_json(BODY), reads_images=True)
    assert caught.value.param == "input[2].content[0].type"  # the audio part
    dropped = MediaPolicy("drop").apply(params_from_json(BODY), reads_images=True)
    kinds = [p.WhichOneof("part") for p in dropped.input[1].message.content]
    assert kinds == ["input_text", "input_image", "input_file"]
    assert dropped.input[2].message.content[0].input_text.text == PLACEHOLDERS["input_audio"]


def test_reject_is_the_seed_400_naming_the_first_part() -> None:
    with pytest.raises(ServiceError) as caught:
        MediaPolicy("reject").apply(params_from_json(BODY))
    assert caught.value.param == "input[1].content[1].type"
    assert caught.value.code == "unsupported_content"


def test_drop_puts_placeholders_in_place_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    params = params_from_json(BODY)
    with caplog.at_level(logging.INFO, logger="mlx_responses.service.responses.media_policy"):
        dropped = MediaPolicy("drop").apply(params, "resp_1")
    texts = [[p.input_text.text for p in item.message.content] for item in dropped.input]
    assert texts == [
        ["Look:"],
        ["this", PLACEHOLDERS["input_image"], PLACEHOLDERS["input_file"]],
        [PLACEHOLDERS["input_audio"]],
    ]
    assert PLACEHOLDERS["input_image"] == "[image omitted: this model has no vision]"
    (record,) = caplog.records
    assert "resp_1" in record.getMessage() and "3 media part(s)" in record.getMessage()
    assert params.input[1].message.content[1].WhichOneof("part") == "input_image"  # left alone


def test_a_request_without_media_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    params = pb.CreateResponseParams(model="m")
    with caplog.at_level(logging.INFO):
        assert MediaPolicy("drop").apply(params) is params
    assert not caplog.records
