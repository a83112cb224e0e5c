"""Resolves `item_reference` input items to the items they name.

An id is looked up in the request's history first (the previous_response_id chain or the
conversation transcript), then in the stored response or conversation its id names
(service/responses/item_ids.py): the Vercel AI SDK replays earlier reasoning and calls by
reference without a chain. An id found
nowhere is a 400 naming `input[i].id`, as OpenAI answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlx_responses.service.errors import invalid
from mlx_responses.service.responses.item_ids import scope_of
from mlx_responses.service.stores.base import ConversationStore, ResponseStore
from mlx_responses.service.stores.transcript import item_id_of

from mlx_responses.v1 import responses_pb2 as pb


def _find(items: Sequence[pb.Item], item_id: str) -> pb.Item | None:
    return next((item for item in items if item_id_of(item) == item_id), None)


async def _stored(responses: ResponseStore, item_id: str) -> pb.Item | None:
    response_id = scope_of(item_id)
    if response_id is None or not responses.enabled:
        return None
    stored = await responses.get(response_id)
    if stored is None or not stored.response.store:
        return None
    return _find(stored.context, item_id)


async def _in_conversation(conversations: ConversationStore, item_id: str) -> pb.Item | None:
    conversation_id = scope_of(item_id, "conv")
    if conversation_id is None or not conversations.enabled:
        return None
    return _find(await conversations.items(conversation_id), item_id)


async def resolve_references(
    params: pb.CreateResponseParams,
    history: Sequence[pb.Item],
    responses: ResponseStore,
    conversations: ConversationStore,
) -> None:
    """Replaces each `item_reference` of `params.input` (in place) with the item it names."""
    for i, item in enumerate(params.input):
        if item.WhichOneof("item") != "item_reference":
            continue
        item_id = item.item_reference.id
        found = _find(history, item_id)
        if found is None:
            found = await _stored(responses, item_id)
        if found is None:
            found = await _in_conversation(conversations, item_id)
        if found is None:
            raise invalid(f"Item with id '{item_id}' not found.", f"input[{i}].id", "not_found")
        item.CopyFrom(found)
