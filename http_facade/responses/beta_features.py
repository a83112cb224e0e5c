"""Beta features a client opts into by header, as Codex does with `x-codex-beta-features`."""

from __future__ import annotations

from aiohttp import web
from mlx_responses.http_facade.kit.errors import invalid

from mlx_responses.v1 import responses_pb2 as pb

HEADER = "x-codex-beta-features"
REMOTE_COMPACTION = "remote_compaction_v2"


def enabled(request: web.Request, feature: str) -> bool:
    """Whether the request's beta header (comma-separated) names `feature`."""
    names = request.headers.get(HEADER, "").split(",")
    return feature in (name.strip() for name in names)


def check_compaction_trigger(request: web.Request, params: pb.CreateResponseParams) -> None:
    """A `compaction_trigger` item needs the remote compaction beta, as on OpenAI's API."""
    for i, item in enumerate(params.input):
        if item.WhichOneof("item") == "compaction_trigger" and not enabled(
            request, REMOTE_COMPACTION
        ):
            raise invalid(
                f"Input item type 'compaction_trigger' needs the header "
                f"'{HEADER}: {REMOTE_COMPACTION}'.",
                f"input[{i}].type",
                "invalid_value",
            )
