"""Reads a request's `input_image` / `input_file` parts into bounded, decoded images (no MLX).

`data:` URLs and `input_file` base64 `file_data` holding an image are read; an http(s) URL is
read only if the pipeline fetched it (`--allow-remote-media`, service/responses/remote_media.py)
and handed its bytes over with `fetched_media`; `file_id`s are refused (no Files API). Every refusal
names the part as `input[i].content[j]`. Bounds: the encoded bytes (`--max-media-bytes`) and the
decoded pixels (`--max-image-pixels`, checked from the header before the pixels are decoded).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from mlx_responses.service.errors import ServiceError, invalid

from mlx_responses.v1 import responses_pb2 as pb

IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP", "image/gif": "GIF"}
IMAGE_FORMATS = set(IMAGE_TYPES.values())
MEDIA_KINDS = ("input_image", "input_file")
# What browsers and SDKs put in base64 (line wraps, spaces) and the decoder must skip.
_WHITESPACE = re.compile(r"[\t\n\f\r ]+")
# A Python object's repr in an exception's text (`<_io.BytesIO object at 0x...>`).
_OBJECT_REPR = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")


@dataclass(frozen=True)
class MediaLimits:
    """`--max-media-bytes` (encoded, per part) and `--max-image-pixels` (decoded, per image)."""

    max_media_bytes: int = 10 * 1024 * 1024
    max_image_pixels: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class DecodedImage:
    """One image, decoded to RGB: its content hash keys the encoding cache."""

    image: Any  # PIL.Image.Image (Pillow comes with the [vision] extra)
    sha256: str
    detail: str  # auto, low, high, original ("" when not given)


@dataclass(frozen=True)
class RemoteBytes:
    """A fetched remote URL's bytes and Content-Type ("" when it names none)."""

    mime: str
    data: bytes


_NONE_FETCHED: Mapping[str, RemoteBytes] = MappingProxyType({})
_fetched: ContextVar[Mapping[str, RemoteBytes]] = ContextVar("fetched_media", default=_NONE_FETCHED)


@contextmanager
def fetched_media(fetched: Mapping[str, RemoteBytes]) -> Iterator[None]:
    """Remote URLs already fetched, readable by decode_part for the block."""
    token = _fetched.set(fetched)
    try:
        yield
    finally:
        _fetched.reset(token)


def has_media(items: Sequence[pb.Item]) -> bool:
    """Whether any message among `items` holds an image or file part."""
    return any(
        part.WhichOneof("part") in MEDIA_KINDS
        for item in items
        if item.WhichOneof("item") == "message"
        for part in item.message.content
    )


def refuse_media(items: Sequence[pb.Item], reason: str) -> None:
    """A 400 naming the first media part of the request's `input` (text-only models)."""
    for i, item in enumerate(items):
        if item.WhichOneof("item") != "message":
            continue
        for j, part in enumerate(item.message.content):
            kind = part.WhichOneof("part")
            if kind in MEDIA_KINDS:
                raise invalid(
                    f"Content part type '{kind}' is not supported by {reason}.",
                    f"input[{i}].content[{j}].type",
                    "unsupported_content",
                )


def naming_part(error: ServiceError) -> ServiceError:
    """The refusal with its message naming the part: a background job's failure carries the
    message and no `param`."""
    if error.param is None or error.param in error.message:
        return error
    message = f"{error.param}: {error.message}"
    return ServiceError(error.reason, message, param=error.param, code=error.code)


def decode_part(part: pb.ContentPart, where: str, limits: MediaLimits) -> DecodedImage:
    """The image of an `input_image` or `input_file` part, or a 400 naming `where`."""
    if part.WhichOneof("part") == "input_image":
        image = part.input_image
        if image.HasField("file_id"):
            raise invalid(
                "'file_id' is not supported: this server has no Files API; send the image as "
                "a data: URL.",
                f"{where}.file_id",
                "unsupported_value",
            )
        mime, data = _data_url(image.image_url, f"{where}.image_url", limits)
        return _decode_image(data, mime, image.detail, where, limits)
    file = part.input_file
    if file.HasField("file_id"):
        raise invalid(
            "'file_id' is not supported: this server has no Files API; send 'file_data'.",
            f"{where}.file_id",
            "unsupported_value",
        )
    if not file.HasField("file_data"):
        mime, data = _data_url(file.file_url, f"{where}.file_url", limits)
    elif _is_data_url(file.file_data):
        mime, data = _data_url(file.file_data, f"{where}.file_data", limits)
    else:
        mime, data = "", _base64(file.file_data, f"{where}.file_data", limits)
    if mime == "application/pdf" or data.startswith(b"%PDF"):
        raise invalid(
            "PDF files are not supported: this server neither rasterizes nor extracts PDF "
            "pages; send the pages as images.",
            f"{where}.file_data",
            "unsupported_file",
        )
    return _decode_image(data, mime, "", where, limits)


def _data_url(url: str, param: str, limits: MediaLimits) -> tuple[str, bytes]:
    if url.startswith(("http://", "https://")):
        fetched = _fetched.get().get(url)
        if fetched is None:
            raise invalid(
                "Remote media URLs are not fetched by this server (start it with "
                "--allow-remote-media); send the data as a data: URL or base64.",
                param,
                "unsupported_value",
            )
        if len(fetched.data) > limits.max_media_bytes:
            raise _too_large(param, limits)
        return fetched.mime, fetched.data
    head, comma, payload = url.partition(",")
    # The scheme and the `;base64` token are case-insensitive (RFC 2397, as browsers read them).
    head = head.strip().lower()
    if not _is_data_url(url) or not comma or not head.endswith(";base64"):
        raise invalid(
            "Expected a base64 data: URL (data:image/png;base64,...).", param, "invalid_image_url"
        )
    mime = head[len("data:") : -len(";base64")].split(";")[0].strip()
    return mime, _base64(payload, param, limits)


def _is_data_url(text: str) -> bool:
    return text[:5].lower() == "data:"


def public_reason(exc: BaseException) -> str:
    """An exception's text for a client: object reprs (memory addresses) left out."""
    return _OBJECT_REPR.sub("the data", str(exc)) or type(exc).__name__


def _base64(payload: str, param: str, limits: MediaLimits) -> bytes:
    # Line wraps and spaces are skipped, as browsers and SDKs do (MIME wraps at 76 columns).
    payload = _WHITESPACE.sub("", payload)
    # Base64 holds 3 bytes per 4 characters: refuse before decoding what would not fit.
    if len(payload) * 3 // 4 > limits.max_media_bytes + 3:
        raise _too_large(param, limits)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise invalid(f"The data is not valid base64: {exc}", param, "invalid_base64") from exc
    if len(data) > limits.max_media_bytes:
        raise _too_large(param, limits)
    return data


def _too_large(param: str, limits: MediaLimits) -> Exception:
    return invalid(
        f"The media part is larger than this server's limit of {limits.max_media_bytes} bytes "
        "(--max-media-bytes).",
        param,
        "media_too_large",
    )


def _decode_image(
    data: bytes, mime: str, detail: str, where: str, limits: MediaLimits
) -> DecodedImage:
    from PIL import Image

    if mime and mime not in IMAGE_TYPES:
        raise invalid(
            f"Unsupported media type '{mime}': expected one of {', '.join(IMAGE_TYPES)}.",
            where,
            "unsupported_media_type",
        )
    try:
        with Image.open(io.BytesIO(data)) as opened:
            if opened.format not in IMAGE_FORMATS:
                raise invalid(
                    f"Unsupported image format '{opened.format}': expected PNG, JPEG, WEBP or GIF.",
                    where,
                    "unsupported_media_type",
                )
            width, height = opened.size
            if width * height > limits.max_image_pixels:
                raise invalid(
                    f"The image is {width}x{height} pixels, more than this server's limit of "
                    f"{limits.max_image_pixels} (--max-image-pixels).",
                    where,
                    "image_too_large",
                )
            opened.seek(0)  # a GIF reads as its first frame
            image = opened.convert("RGB")
    except Image.UnidentifiedImageError as exc:
        raise invalid(
            "The image could not be decoded: its bytes are not a PNG, JPEG, WEBP or GIF image.",
            where,
            "invalid_image",
        ) from exc
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise invalid(
            f"The image could not be decoded: {public_reason(exc)}", where, "invalid_image"
        ) from exc
    return DecodedImage(image=image, sha256=hashlib.sha256(data).hexdigest(), detail=detail)
