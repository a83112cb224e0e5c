"""The new RPCs over real gRPC with the typed client: input items, conversations, job replay."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from mlx_responses.v1 import storage_service_pb2 as st
from mlx_responses_client import Client, text_params
from tests.support.stack import Stack


@pytest.fixture(scope="module")
def client(stack: Stack) -> Iterator[Client]:
    with Client.connect(stack.grpc_address) as c:
        yield c


def _user(text: str) -> pb.Item:
    part = pb.ContentPart(input_text=pb.InputText(text=text))
    return pb.Item(message=pb.MessageItem(role=pb.ROLE_USER, content=[part]))


def test_input_items_page_over_grpc(stack: Stack, client: Client) -> None:
    response = client.create(text_params(stack.settings.models[0].name, "Reply with: hello"))
    page = client.list_input_items(response.id, st.ItemPageQuery(order="asc"))
    assert [i.message.content[0].input_text.text for i in page.items] == ["Reply with: hello"]
    assert page.first_id.startswith("msg_") and page.first_id == page.last_id
    with pytest.raises(grpc.RpcError) as refused:
        client.list_input_items(response.id, st.ItemPageQuery(limit=0))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_conversations_over_grpc(client: Client) -> None:
    conv = client.create_conversation([_user("one")], {"k": "v"})
    assert conv.id.startswith("conv_") and dict(conv.metadata) == {"k": "v"}
    added = client.add_conversation_items(conv.id, [_user("two")])
    assert added.items[0].message.id.startswith("msg_")
    listed = client.list_conversation_items(conv.id, st.ItemPageQuery(order="asc"))
    assert [i.message.content[0].input_text.text for i in listed.items] == ["one", "two"]
    item_id = listed.items[0].message.id
    assert client.get_conversation_item(conv.id, item_id).message.id == item_id
    assert client.update_conversation(conv.id, {}).metadata == {}
    assert client.delete_conversation_item(conv.id, item_id).id == conv.id
    assert client.retrieve_conversation(conv.id).id == conv.id
    assert client.delete_conversation(conv.id).deleted
    with pytest.raises(grpc.RpcError) as missing:
        client.retrieve_conversation(conv.id)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_stream_job_events_replays_from_a_sequence_number(stack: Stack, client: Client) -> None:
    job = client.create_job(text_params(stack.settings.models[0].name, "Reply with: hello"))
    full = [e for batch in client.stream_job_events(job.id) for e in batch]
    assert [e.sequence_number for e in full] == list(range(len(full)))
    assert full[-1].type == ev.EVENT_TYPE_RESPONSE_COMPLETED
    tail = [e for batch in client.stream_job_events(job.id, starting_after=1) for e in batch]
    assert tail == full[2:]
    with pytest.raises(grpc.RpcError) as past:
        list(client.stream_job_events(job.id, starting_after=len(full)))
    assert past.value.code() == grpc.StatusCode.INVALID_ARGUMENT
