"""`input_image` and `input_file` content parts: JSON <-> proto (the core decodes them)."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.media import IMAGE_DETAILS

from mlx_responses.v1 import responses_pb2 as pb


def _optional_str(part: dict[str, Any], key: str, where: str) -> str | None:
    value = part.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(
            f"Invalid type for '{where}.{key}': expected a string.",
            f"{where}.{key}",
            "invalid_type",
        )
    return value


def image_part(part: dict[str, Any], where: str) -> pb.ContentPart:
    """An `input_image` part: `image_url` or `file_id`, and `detail`."""
    url = _optional_str(part, "image_url", where)
    file_id = _optional_str(part, "file_id", where)
    detail = _optional_str(part, "detail", where) or ""
    if detail and detail not in IMAGE_DETAILS:
        raise invalid(
            f"Invalid 'detail' {detail!r}: expected one of {', '.join(IMAGE_DETAILS)}.",
            f"{where}.detail",
            "invalid_value",
        )
    if url is None and file_id is None:
        raise invalid("An input_image needs 'image_url' or 'file_id'.", f"{where}.image_url")
    image = pb.VisionInputImage(detail=detail)
    if url is not None:
        image.image_url = url
    if file_id is not None:
        image.file_id = file_id
    return pb.ContentPart(input_image=image)


def file_part(part: dict[str, Any], where: str) -> pb.ContentPart:
    """An `input_file` part: `file_data` (base64), `file_id` or `file_url`, and `filename`."""
    file = pb.VisionInputFile()
    for key in ("file_data", "file_id", "file_url", "filename"):
        value = _optional_str(part, key, where)
        if value is not None:
            setattr(file, key, value)
    if not (file.HasField("file_data") or file.HasField("file_id") or file.HasField("file_url")):
        raise invalid(
            "An input_file needs 'file_data', 'file_id' or 'file_url'.", f"{where}.file_data"
        )
    return pb.ContentPart(input_file=file)


def media_to_json(part: pb.ContentPart) -> dict[str, Any] | None:
    """The JSON of a media part (as the request sent it); None for other parts."""
    kind = part.WhichOneof("part")
    if kind == "input_image":
        image = part.input_image
        out: dict[str, Any] = {"type": "input_image", "detail": image.detail or "auto"}
        out["image_url"] = image.image_url if image.HasField("image_url") else None
        if image.HasField("file_id"):
            out["file_id"] = image.file_id
        return out
    if kind == "input_file":
        file = part.input_file
        result: dict[str, Any] = {"type": "input_file"}
        for key in ("file_data", "file_id", "file_url", "filename"):
            if file.HasField(key):
                result[key] = getattr(file, key)
        return result
    return None
