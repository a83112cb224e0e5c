"""The Conversations API (`/v1/conversations...`): JSON to core RPCs and back."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from mlx_responses.http_facade.kit.body import read_body
from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.kit.json_body import parse_body
from mlx_responses.http_facade.kit.requests import core
from mlx_responses.http_facade.responses.from_proto import item_to_json
from mlx_responses.http_facade.responses.item_lists import include_values, page_query, page_to_json
from mlx_responses.http_facade.responses.to_proto import item_from_json

from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st


def conversation_to_json(info: st.ConversationObject) -> dict[str, Any]:
    """OpenAI's conversation object."""
    return {
        "id": info.id,
        "object": "conversation",
        "created_at": info.created_at,
        "metadata": dict(info.metadata),
    }


JSON_WHITESPACE = b" \t\n\r"


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await read_body(request)  # Content-Encoding decoded or refused in the envelope
    # No body (the document's requestBody is optional) is only what JSON calls whitespace:
    # bytes.strip() also drops \x0b and \x0c, and such a body created a conversation.
    body = parse_body(raw) if raw.strip(JSON_WHITESPACE) else {}
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.", None, "invalid_type")
    return body


def _items(value: Any, param: str = "items") -> list[pb.Item]:
    if not isinstance(value, list):
        raise invalid(f"Invalid type for '{param}': expected an array.", param, "invalid_type")
    return [item_from_json(item, f"{param}[{i}]") for i, item in enumerate(value)]


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        message = "Invalid type for 'metadata': expected an object."
        raise invalid(message, "metadata", "invalid_type")
    for key, entry in value.items():
        if not isinstance(entry, str):
            raise invalid(
                f"Invalid type for 'metadata.{key}': expected a string.",
                f"metadata.{key}",
                "invalid_type",
            )
    return dict(value)


def create_from_json(body: dict[str, Any]) -> tuple[list[pb.Item], dict[str, str]]:
    """A create body's items and metadata (both optional)."""
    items = _items(body["items"]) if body.get("items") is not None else []
    return items, _metadata(body.get("metadata"))


async def create_conversation(request: web.Request) -> web.Response:
    """POST /v1/conversations."""
    items, metadata = create_from_json(await _body(request))
    info = await core(request).create_conversation(items, metadata)
    return web.json_response(conversation_to_json(info))


async def retrieve_conversation(request: web.Request) -> web.Response:
    """GET /v1/conversations/{conversation_id}."""
    info = await core(request).retrieve_conversation(request.match_info["conversation_id"])
    return web.json_response(conversation_to_json(info))


async def update_conversation(request: web.Request) -> web.Response:
    """POST /v1/conversations/{conversation_id}: replaces the metadata."""
    body = await _body(request)
    if "metadata" not in body:
        raise invalid("Missing required parameter: 'metadata'.", "metadata")
    conversation_id = request.match_info["conversation_id"]
    info = await core(request).update_conversation(conversation_id, _metadata(body["metadata"]))
    return web.json_response(conversation_to_json(info))


async def delete_conversation(request: web.Request) -> web.Response:
    """DELETE /v1/conversations/{conversation_id}."""
    reply = await core(request).delete_conversation(request.match_info["conversation_id"])
    return web.json_response({"id": reply.id, "object": "conversation.deleted", "deleted": True})


async def list_items(request: web.Request) -> web.Response:
    """GET /v1/conversations/{conversation_id}/items."""
    conversation_id = request.match_info["conversation_id"]
    page = await core(request).list_conversation_items(conversation_id, page_query(request.query))
    return web.json_response(page_to_json(page))


async def add_items(request: web.Request) -> web.Response:
    """POST /v1/conversations/{conversation_id}/items."""
    body = await _body(request)
    if body.get("items") is None:
        raise invalid("Missing required parameter: 'items'.", "items")
    conversation_id = request.match_info["conversation_id"]
    page = await core(request).add_conversation_items(
        conversation_id, _items(body["items"]), include_values(request.query)
    )
    return web.json_response(page_to_json(page))


async def get_item(request: web.Request) -> web.Response:
    """GET /v1/conversations/{conversation_id}/items/{item_id}."""
    item = await core(request).get_conversation_item(
        request.match_info["conversation_id"],
        request.match_info["item_id"],
        include_values(request.query),
    )
    return web.json_response(item_to_json(item))


async def delete_item(request: web.Request) -> web.Response:
    """DELETE /v1/conversations/{conversation_id}/items/{item_id}: answers the conversation."""
    info = await core(request).delete_conversation_item(
        request.match_info["conversation_id"], request.match_info["item_id"]
    )
    return web.json_response(conversation_to_json(info))


def add_conversation_routes(app: web.Application, prefix: str) -> None:
    """Mounts the Conversations API under `prefix` (/v1, or bare)."""
    base = f"{prefix}/conversations"
    one = f"{base}/{{conversation_id}}"
    app.router.add_post(base, create_conversation)
    app.router.add_get(one, retrieve_conversation)
    app.router.add_post(one, update_conversation)
    app.router.add_delete(one, delete_conversation)
    app.router.add_get(f"{one}/items", list_items)
    app.router.add_post(f"{one}/items", add_items)
    app.router.add_get(f"{one}/items/{{item_id}}", get_item)
    app.router.add_delete(f"{one}/items/{{item_id}}", delete_item)
