"""`GET /v1/responses/{id}/input_items` and `item_reference` input items, through the OpenAI SDK,
on the memory store and on Redis."""

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
    return {"role": "user", "content": text}


def _error(reply: httpx.Response, status: int, param: str) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert isinstance(error["message"], str) and error["message"]
    return error


def test_input_items_have_ids_and_list_newest_first(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    resp = client.responses.create(
        model=_model(each_store_stack),
        input=[_user("Reply with: one"), _user("Reply with: hello")],
        max_output_tokens=8,
    )
    page = client.responses.input_items.list(resp.id)
    assert [item.content[0].text for item in page.data] == ["Reply with: hello", "Reply with: one"]
    ids = [item.id for item in page.data]
    assert all(i.startswith("msg_") for i in ids) and len(set(ids)) == 2
    assert page.first_id == ids[0] and page.last_id == ids[1] and page.has_more is False
    raw = httpx.get(f"{each_store_stack.base_url}/v1/responses/{resp.id}/input_items").json()
    assert raw["object"] == "list" and set(raw) == {
        "object",
        "data",
        "first_id",
        "last_id",
        "has_more",
    }
    # The ids are stable: a second read answers the same ones.
    again = client.responses.input_items.list(resp.id, order="asc")
    assert [item.id for item in again.data] == ids[::-1]


def test_a_chained_response_lists_the_whole_context_it_continued(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    first = client.responses.create(
        model=_model(each_store_stack), input="Reply with: hello", max_output_tokens=8
    )
    second = client.responses.create(
        model=_model(each_store_stack),
        input="Reply with: rain",
        previous_response_id=first.id,
        max_output_tokens=8,
    )
    items = client.responses.input_items.list(second.id, order="asc").data
    # (The reasoning echo may put back reasoning an earlier turn gave the same reply.)
    items = [item for item in items if item.type != "reasoning"]
    assert [item.type for item in items] == ["message", "message", "message"]
    assert items[1].id == first.output[-1].id  # the first response's answer, with its id
    assert [item.role for item in items] == ["user", "assistant", "user"]


def test_pages_with_after_before_and_limit(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    texts = [f"Reply with: w{i}" for i in range(5)]
    resp = client.responses.create(
        model=_model(each_store_stack), input=[_user(t) for t in texts], max_output_tokens=4
    )
    first = client.responses.input_items.list(resp.id, order="asc", limit=2)
    assert [i.content[0].text for i in first.data] == texts[:2] and first.has_more is True
    second = client.responses.input_items.list(resp.id, order="asc", limit=2, after=first.last_id)
    assert [i.content[0].text for i in second.data] == texts[2:4] and second.has_more
    last = client.responses.input_items.list(resp.id, order="asc", limit=2, after=second.last_id)
    assert [i.content[0].text for i in last.data] == texts[4:] and not last.has_more
    # `before` is OpenAI's too, though this SDK version has no argument for it.
    before = client.responses.input_items.list(
        resp.id, order="asc", extra_query={"before": second.first_id}
    )
    assert [i.content[0].text for i in before.data] == texts[:2]
    # The SDK's auto-pagination walks every page by `after`.
    walked = list(client.responses.input_items.list(resp.id, limit=2))
    assert [i.content[0].text for i in walked] == texts[::-1]


def test_bad_list_parameters_are_openai_errors(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    resp = client.responses.create(
        model=_model(each_store_stack), input="Reply with: hello", max_output_tokens=4
    )
    for limit in (0, 101):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.input_items.list(resp.id, limit=limit)
        assert caught.value.body["param"] == "limit"  # type: ignore[index]
    url = f"{each_store_stack.base_url}/v1/responses/{resp.id}/input_items"
    _error(httpx.get(url, params={"limit": "many"}), 400, "limit")
    _error(httpx.get(url, params={"order": "sideways"}), 400, "order")
    _error(httpx.get(url, params={"include[]": "no.such.thing"}), 400, "include")
    _error(httpx.get(url, params={"after": "msg_unknown"}), 400, "after")
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list("resp_unknown")


def _reasoned(stack: Stack) -> Any:
    """A response whose output holds a reasoning item and a message."""
    resp = _sdk(stack).responses.create(
        model=_model(stack),
        input="Reply with: rain",
        max_output_tokens=64,
        extra_body={"chat_template_kwargs": {"enable_thinking": True}},
    )
    kinds = [item.type for item in resp.output]
    assert kinds[0] == "reasoning" and kinds[-1] == "message", kinds
    return resp


def test_item_references_resolve_from_the_store(each_store_stack: Stack) -> None:
    client = _sdk(each_store_stack)
    first = _reasoned(each_store_stack)
    reasoning, answer = first.output[0], first.output[-1]
    assert reasoning.id.startswith("rs_") and answer.id.startswith("msg_")
    # No previous_response_id: the references alone bring the earlier items back (Vercel AI SDK).
    second = client.responses.create(
        model=_model(each_store_stack),
        input=[
            _user("Reply with: rain"),
            {"type": "item_reference", "id": reasoning.id},
            {"type": "item_reference", "id": answer.id},
            _user("Reply with: hello"),
        ],
        max_output_tokens=8,
    )
    assert second.status == "completed"
    items = client.responses.input_items.list(second.id, order="asc").data
    assert [item.type for item in items] == ["message", "reasoning", "message", "message"]
    assert items[1].id == reasoning.id and items[2].id == answer.id
    assert items[1].content[0].text == reasoning.content[0].text
    # Counting tokens resolves them the same way.
    reference = {"type": "item_reference", "id": answer.id}
    counted = httpx.post(
        f"{each_store_stack.base_url}/v1/responses/input_tokens",
        json={"model": _model(each_store_stack), "input": [reference]},
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0


def test_an_unknown_item_reference_is_a_400_naming_it(each_store_stack: Stack) -> None:
    body = {
        "model": _model(each_store_stack),
        "input": [_user("hi"), {"type": "item_reference", "id": "rs_" + "ab" * 28}],
    }
    reply = httpx.post(f"{each_store_stack.base_url}/v1/responses", json=body, timeout=60)
    _error(reply, 400, "input[1].id")
    body["input"] = [{"type": "item_reference"}]
    _error(httpx.post(f"{each_store_stack.base_url}/v1/responses", json=body), 400, "input[0].id")
