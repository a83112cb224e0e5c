"""Image parts as browsers and SDKs send them: wrapped base64, any-case `data:` schemes; and
refusals that name the part without echoing Python internals."""

from __future__ import annotations

import base64
import io
import textwrap

import pytest

pytest.importorskip("PIL")
from mlx_responses.service.errors import ServiceError
from mlx_responses.service.text.media import MediaLimits, decode_part
from PIL import Image

from mlx_responses.v1 import responses_pb2 as pb

LIMITS = MediaLimits(max_media_bytes=64 * 1024, max_image_pixels=512 * 512)


def _png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _image(url: str) -> pb.ContentPart:
    return pb.ContentPart(input_image=pb.VisionInputImage(image_url=url))


def _file(data: str) -> pb.ContentPart:
    return pb.ContentPart(input_file=pb.VisionInputFile(file_data=data, filename="a.png"))


@pytest.mark.parametrize(
    "part",
    [
        _image("data:image/png;base64," + "\n".join(textwrap.wrap(_png(), 76))),
        _image("data:image/png;base64," + "\r\n".join(textwrap.wrap(_png(), 64)) + "\r\n"),
        _image("data:image/png;base64, " + " ".join(textwrap.wrap(_png(), 4))),
        _image("DATA:image/png;base64," + _png()),
        _image("Data:Image/PNG;BASE64," + _png()),
        _file("DATA:image/png;base64," + _png()),
        _file("\n".join(textwrap.wrap(_png(), 76))),
    ],
    ids=[
        "lf-wrapped",
        "crlf-wrapped",
        "spaced",
        "upper-scheme",
        "mixed-case",
        "file-upper",
        "file-wrapped",
    ],
)
def test_accepted_spellings_decode(part: pb.ContentPart) -> None:
    image = decode_part(part, "input[0].content[1]", LIMITS)
    assert image.image.size == (40, 30)


def test_undecodable_image_names_no_python_object() -> None:
    with pytest.raises(ServiceError) as caught:
        decode_part(_image("data:image/png;base64,aGVsbG8="), "input[0].content[1]", LIMITS)
    error = caught.value
    assert error.param == "input[0].content[1]" and error.code == "invalid_image"
    assert "0x" not in error.message and "BytesIO" not in error.message


def test_wrapped_base64_still_bounded() -> None:
    big = base64.b64encode(bytes(LIMITS.max_media_bytes + 10)).decode()
    with pytest.raises(ServiceError) as caught:
        decode_part(
            _image("data:image/png;base64," + "\n".join(textwrap.wrap(big, 76))),
            "input[0].content[0]",
            LIMITS,
        )
    assert caught.value.code == "media_too_large"
