"""Media parts (images, files, audio) for a text-only model: refused (seed) or placeholders.

`--media drop` is for agents such as Codex, whose `view_image` leaves images in the history
they resend every turn: a 400 there would end the session for good.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mlx_responses.service.errors import invalid

from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

PLACEHOLDERS = {
    "input_image": "[image omitted: this model has no vision]",
    "input_file": "[file omitted: this model reads text only]",
    "input_audio": "[audio omitted: this model reads text only]",
}


# Parts that carry their data (a vision model reads them); `media` parts carry only their kind.
IMAGE_PARTS = ("input_image", "input_file")


def _kind(part: pb.ContentPart) -> str:
    kind = part.WhichOneof("part")
    return part.media.type if kind == "media" else str(kind)


@dataclass(frozen=True)
class MediaPolicy:
    """Applies `--media` to a request's input before it is validated or rendered."""

    mode: str = "reject"

    def apply(
        self,
        params: pb.CreateResponseParams,
        log_id: str | None = None,
        *,
        reads_images: bool = False,
    ) -> pb.CreateResponseParams:
        """The request without media parts; a 400 naming the first one in `reject` mode.

        `reads_images`: a vision model's runtime (service/models/vision_runtime.py) reads
        `input_image` and `input_file` parts itself; only the others are media to it.
        """
        found = [
            (i, j, _kind(part))
            for i, item in enumerate(params.input)
            if item.WhichOneof("item") == "message"
            for j, part in enumerate(item.message.content)
            if part.WhichOneof("part") == "media"
            or (not reads_images and part.WhichOneof("part") in IMAGE_PARTS)
        ]
        if not found:
            return params
        if self.mode != "drop":
            i, j, kind = found[0]
            raise invalid(
                f"Content part type '{kind}' is not supported by this text model "
                "(start the server with --media drop to replace media with a placeholder).",
                f"input[{i}].content[{j}].type",
                "unsupported_content",
            )
        replaced = pb.CreateResponseParams()
        replaced.CopyFrom(params)
        for i, j, kind in found:
            placeholder = PLACEHOLDERS.get(kind, f"[{kind} omitted: this model reads text only]")
            part = replaced.input[i].message.content[j]
            part.input_text.text = placeholder  # replaces the media member of the oneof
        kinds = sorted({kind for _, _, kind in found})
        log.info(
            "response %s: %d media part(s) (%s) replaced by a placeholder: this model has no "
            "vision (--media drop)",
            log_id or "-",
            len(found),
            ", ".join(kinds),
        )
        return replaced
