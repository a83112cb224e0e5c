"""OpenAI's item lists: `after`, `before`, `limit` (1-100), `order` (asc/desc), `include`.

Shared by `GET /v1/responses/{id}/input_items` and `GET /v1/conversations/{id}/items`; the
bad values are 400s naming the parameter, as OpenAI answers them.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlx_responses.service.errors import invalid
from mlx_responses.service.stores.transcript import item_id_of

from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
ORDERS = ("asc", "desc")
LOGPROBS_INCLUDE = "message.output_text.logprobs"
# OpenAI's include values for item lists; the ones naming tools this server lacks select nothing.
INCLUDABLE = {
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    LOGPROBS_INCLUDE,
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
}


def check_include(include: Sequence[str]) -> None:
    """A 400 naming `include` for a value OpenAI does not define."""
    for value in include:
        if value not in INCLUDABLE:
            known = ", ".join(sorted(INCLUDABLE))
            raise invalid(
                f"Invalid 'include' value {value!r}: expected one of {known}.",
                "include",
                "invalid_value",
            )


def shown(item: pb.Item, include: Sequence[str]) -> pb.Item:
    """The item as a list shows it: token logprobs only when `include` asks for them."""
    if LOGPROBS_INCLUDE in include or item.WhichOneof("item") != "message":
        return item
    copy = pb.Item()
    copy.CopyFrom(item)
    for part in copy.message.content:
        if part.WhichOneof("part") == "output_text":
            del part.output_text.logprobs[:]
    return copy


def _position(ids: list[str], item_id: str, param: str) -> int:
    try:
        return ids.index(item_id)
    except ValueError:
        raise invalid(f"No item with id '{item_id}' in this list.", param, "not_found") from None


def page(items: Sequence[pb.Item], query: st.ItemPageQuery) -> st.ItemPage:
    """One page of `items` (oldest first) as the query asks."""
    limit = query.limit if query.HasField("limit") else DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid(
            f"Invalid 'limit': {limit}; expected an integer from 1 to {MAX_LIMIT}.",
            "limit",
            "integer_out_of_range",
        )
    order = query.order if query.HasField("order") else "desc"
    if order not in ORDERS:
        raise invalid(
            f"Invalid 'order' {order!r}: expected 'asc' or 'desc'.", "order", "invalid_value"
        )
    check_include(query.include)
    ordered = list(items) if order == "asc" else list(reversed(items))
    ids = [item_id_of(item) for item in ordered]
    start, end = 0, len(ordered)
    if query.HasField("after"):
        start = _position(ids, query.after, "after") + 1
    if query.HasField("before"):
        end = _position(ids, query.before, "before")
    window = ordered[start:end]
    chosen = window[:limit]
    return st.ItemPage(
        items=[shown(item, query.include) for item in chosen],
        first_id=item_id_of(chosen[0]) if chosen else "",
        last_id=item_id_of(chosen[-1]) if chosen else "",
        has_more=len(window) > limit,
    )
