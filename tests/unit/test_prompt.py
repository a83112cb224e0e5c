"""Items to chat messages: roles, tool calls, reasoning placement, compaction replay."""

from __future__ import annotations

from mlx_responses.service.text.compaction_items import decode_compaction, encode_compaction
from mlx_responses.service.text.prompt import items_to_messages

from mlx_responses.v1 import responses_pb2 as pb


def _msg(role: int, text: str) -> pb.Item:
    part = (
        pb.ContentPart(output_text=pb.OutputText(text=text))
        if role == pb.ROLE_ASSISTANT
        else pb.ContentPart(input_text=pb.InputText(text=text))
    )
    return pb.Item(message=pb.MessageItem(role=role, content=[part]))


def _reasoning(text: str) -> pb.Item:
    return pb.Item(reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text=text)]))


def test_instructions_and_developer_merge_into_one_system_message() -> None:
    messages = items_to_messages(
        "Be brief.", [_msg(pb.ROLE_DEVELOPER, "No jokes."), _msg(pb.ROLE_USER, "hi")]
    )
    assert messages == [
        {"role": "system", "content": "Be brief.\n\nNo jokes."},
        {"role": "user", "content": "hi"},
    ]


def test_reasoning_attaches_to_the_next_assistant_message() -> None:
    messages = items_to_messages(
        None, [_msg(pb.ROLE_USER, "q"), _reasoning("why"), _msg(pb.ROLE_ASSISTANT, "a")]
    )
    assert messages[1] == {"role": "assistant", "content": "a", "reasoning_content": "why"}


def test_reasoning_without_a_reply_still_renders() -> None:
    messages = items_to_messages(
        None, [_msg(pb.ROLE_USER, "q"), _reasoning("hmm"), _msg(pb.ROLE_USER, "next")]
    )
    assert messages[1] == {"role": "assistant", "content": "", "reasoning_content": "hmm"}
    assert messages[2]["role"] == "user"


def test_function_calls_group_and_outputs_become_tool_messages() -> None:
    call = pb.Item(
        function_call=pb.FunctionCallItem(call_id="c1", name="f", arguments='{"a": "b"}')
    )
    call2 = pb.Item(function_call=pb.FunctionCallItem(call_id="c2", name="g", arguments="{}"))
    out = pb.Item(function_call_output=pb.FunctionCallOutputItem(call_id="c1", output="ok"))
    messages = items_to_messages(None, [_msg(pb.ROLE_USER, "q"), call, call2, out])
    assistant = messages[1]
    assert assistant["role"] == "assistant"
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["f", "g"]
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"a": "b"}
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_compaction_round_trip_and_replay() -> None:
    retained = [_msg(pb.ROLE_USER, "latest")]
    content = encode_compaction("we talked about rain", retained)
    summary, items = decode_compaction(content)
    assert summary == "we talked about rain" and items == retained
    messages = items_to_messages(
        None, [pb.Item(compaction=pb.CompactionItem(encrypted_content=content))]
    )
    assert "we talked about rain" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "latest"}


def test_a_reasoning_item_replayed_with_only_its_summary_renders_the_summary() -> None:
    summary_only = pb.Item(reasoning=pb.ReasoningItem(summary=[pb.SummaryText(text="why")]))
    messages = items_to_messages(
        None, [_msg(pb.ROLE_USER, "q"), summary_only, _msg(pb.ROLE_ASSISTANT, "a")]
    )
    assert messages[1] == {"role": "assistant", "content": "a", "reasoning_content": "why"}
