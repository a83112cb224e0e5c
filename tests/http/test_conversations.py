"""The Conversations API through the OpenAI SDK's own methods, on the memory store and on Redis."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.support.stack import Stack


def _sdk(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key="x", max_retries=0)


def _model(stack: Stack) -> str:
    return stack.settings.models[0].name


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def _texts(items: Any) -> list[str]:
    return [item.content[0].text for item in items]


def test_create_retrieve_update_delete(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    conv = client.conversations.create(items=[_user("hello there")], metadata={"topic": "demo"})
    assert conv.id.startswith("conv_") and conv.object == "conversation"
    assert conv.metadata == {"topic": "demo"} and conv.created_at > 0
    fetched = client.conversations.retrieve(conv.id)
    assert fetched.id == conv.id and fetched.created_at == conv.created_at
    updated = client.conversations.update(conv.id, metadata={"topic": "other"})
    assert updated.metadata == {"topic": "other"} and updated.created_at == conv.created_at
    deleted = client.conversations.delete(conv.id)
    assert deleted.id == conv.id and deleted.deleted is True
    assert deleted.object == "conversation.deleted"
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)


def test_items_add_list_page_retrieve_delete(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    conv = client.conversations.create()
    added = client.conversations.items.create(conv.id, items=[_user(f"note {i}") for i in range(3)])
    assert added.object == "list" and _texts(added.data) == ["note 0", "note 1", "note 2"]
    ids = [item.id for item in added.data]
    assert all(i.startswith("msg_") for i in ids) and len(set(ids)) == 3
    assert added.first_id == ids[0] and added.last_id == ids[2]
    newest = client.conversations.items.list(conv.id, limit=2)  # desc by default, as OpenAI
    assert _texts(newest.data) == ["note 2", "note 1"] and newest.has_more is True
    rest = client.conversations.items.list(conv.id, limit=2, after=newest.last_id)
    assert _texts(rest.data) == ["note 0"] and rest.has_more is False
    assert _texts(client.conversations.items.list(conv.id, order="asc")) == [
        "note 0",
        "note 1",
        "note 2",
    ]
    one = client.conversations.items.retrieve(ids[1], conversation_id=conv.id)
    assert one.id == ids[1] and one.content[0].text == "note 1"  # type: ignore[union-attr]
    after_delete = client.conversations.items.delete(ids[1], conversation_id=conv.id)
    assert after_delete.id == conv.id and after_delete.object == "conversation"
    assert [i.id for i in client.conversations.items.list(conv.id, order="asc")] == [
        ids[0],
        ids[2],
    ]


def test_responses_append_to_a_conversation(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    conv = client.conversations.create(items=[_user("Reply with: one")])
    first = client.responses.create(
        model=_model(each_store_stack),
        input="Reply with: hello",
        conversation=conv.id,
        max_output_tokens=8,
    )
    assert first.conversation is not None and first.conversation.id == conv.id
    items = list(client.conversations.items.list(conv.id, order="asc"))
    assert [item.type for item in items] == ["message", "message", "message"]
    assert items[-1].id == first.output[-1].id and items[-1].role == "assistant"  # type: ignore[union-attr]
    second = client.responses.create(
        model=_model(each_store_stack),
        input="Reply with: rain",
        conversation={"id": conv.id},
        max_output_tokens=8,
    )
    # The second turn continued from the whole transcript.
    context = client.responses.input_items.list(second.id, order="asc").data
    # (The reasoning echo may put back reasoning an earlier turn gave the same reply.)
    replayed = [item.id for item in context if item.type != "reasoning"]
    assert replayed[:3] == [item.id for item in items]
    # An item of the conversation is referenced by id.
    third = client.responses.create(
        model=_model(each_store_stack),
        input=[{"type": "item_reference", "id": items[0].id}],
        conversation=conv.id,
        max_output_tokens=8,
    )
    assert third.status == "completed"
    # ... and without naming the conversation: the id says which conversation holds it.
    fourth = client.responses.create(
        model=_model(each_store_stack),
        input=[{"type": "item_reference", "id": items[0].id}, _user("Reply with: hello")],
        max_output_tokens=8,
    )
    context = client.responses.input_items.list(fourth.id, order="asc").data
    assert context[0].id == items[0].id and context[0].content[0].text == "Reply with: one"  # type: ignore[union-attr]


def test_client_named_conversations_keep_working(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    name = "my-named-chat"
    client.responses.create(
        model=_model(each_store_stack),
        input="Reply with: hello",
        conversation=name,
        max_output_tokens=8,
    )
    fetched = client.conversations.retrieve(name)
    assert fetched.id == name and fetched.created_at > 0
    assert [item.type for item in client.conversations.items.list(name, order="asc")] == [
        "message",
        "message",
    ]
    assert client.conversations.delete(name).deleted


def _error(reply: httpx.Response, status: int, param: str | None) -> None:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert error["message"]


def test_bad_conversation_requests_are_openai_errors(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    for call in (
        lambda: client.conversations.retrieve("conv_unknown"),
        lambda: client.conversations.update("conv_unknown", metadata={}),
        lambda: client.conversations.delete("conv_unknown"),
        lambda: client.conversations.items.list("conv_unknown"),
        lambda: client.conversations.items.create("conv_unknown", items=[_user("x")]),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    conv = client.conversations.create()
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve("msg_unknown", conversation_id=conv.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete("msg_unknown", conversation_id=conv.id)
    base = f"{each_store_stack.base_url}/v1/conversations"
    _error(httpx.get(f"{base}/{conv.id}/items", params={"limit": 101}), 400, "limit")
    _error(httpx.get(f"{base}/{conv.id}/items", params={"limit": 0}), 400, "limit")
    _error(httpx.get(f"{base}/{conv.id}/items", params={"order": "up"}), 400, "order")
    many = [_user(str(i)) for i in range(21)]
    _error(httpx.post(f"{base}/{conv.id}/items", json={"items": many}), 400, "items")
    _error(httpx.post(f"{base}/{conv.id}/items", json={}), 400, "items")
    _error(
        httpx.post(f"{base}/{conv.id}/items", json={"items": [{"type": "nope"}]}),
        400,
        "items[0].type",
    )
    wide = {f"k{i}": "v" for i in range(17)}
    _error(httpx.post(base, json={"metadata": wide}), 400, "metadata")
    _error(httpx.post(f"{base}/{conv.id}", json={}), 400, "metadata")


def test_a_disabled_conversation_store_refuses_the_routes(make_stack: Any) -> None:
    stack = make_stack(conversation_store_max_entries=0)
    reply = httpx.post(f"{stack.base_url}/v1/conversations", json={})
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "store_disabled"


@pytest.mark.parametrize(
    "item", [{"type": "compaction_trigger"}, {"type": "item_reference", "id": "msg_1"}]
)
def test_only_whole_items_are_kept(stack: Stack, item: dict[str, Any]) -> None:
    """A trigger or a reference asks something of the core; a transcript cannot list one."""
    base = stack.base_url
    for path, body in [
        ("/v1/conversations", {"items": [_user("hi"), item]}),
        (f"/v1/conversations/{_sdk(stack).conversations.create().id}/items", {"items": [item]}),
    ]:
        reply = httpx.post(f"{base}{path}", json=body, timeout=30)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"].endswith(".type")
