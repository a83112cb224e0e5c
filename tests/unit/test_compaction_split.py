"""The compaction cut as pure functions over item lists: turns, tool groups, instructions."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from mlx_responses.service.compaction.split import (
    NothingToCompactError,
    split_history,
    split_points,
)
from mlx_responses.service.text.compaction_items import (
    CompactionDecodeError,
    decode_compaction,
    effective_items,
    encode_compaction,
)
from mlx_responses.service.text.prompt import items_to_messages

from mlx_responses.v1 import responses_pb2 as pb


def msg(role: int, text: str) -> pb.Item:
    kind = "output_text" if role == pb.ROLE_ASSISTANT else "input_text"
    part = (
        pb.ContentPart(output_text=pb.OutputText(text=text))
        if kind == "output_text"
        else pb.ContentPart(input_text=pb.InputText(text=text))
    )
    return pb.Item(message=pb.MessageItem(role=role, content=[part]))


def user(text: str) -> pb.Item:
    return msg(pb.ROLE_USER, text)


def bot(text: str) -> pb.Item:
    return msg(pb.ROLE_ASSISTANT, text)


def call(call_id: str) -> pb.Item:
    return pb.Item(function_call=pb.FunctionCallItem(call_id=call_id, name="f", arguments="{}"))


def output(call_id: str) -> pb.Item:
    return pb.Item(function_call_output=pb.FunctionCallOutputItem(call_id=call_id, output="ok"))


def reasoning(text: str) -> pb.Item:
    return pb.Item(reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text=text)]))


def compaction(summary: str, retained: Sequence[pb.Item]) -> pb.Item:
    return pb.Item(
        compaction=pb.CompactionItem(
            id="cmp_1", encrypted_content=encode_compaction(summary, retained)
        )
    )


def words(items: Sequence[pb.Item]) -> int:
    """A stand-in token count: one per item."""
    return len(items)


def test_splits_fall_before_user_turns_and_after_completed_tool_groups() -> None:
    body = [user("a"), bot("b"), user("c"), call("1"), output("1"), bot("d"), user("e")]
    # 0: all retained; 2: before user c; 5: after the completed group; 6: before user e;
    # 7: the end.
    assert split_points(body) == [0, 2, 5, 6, 7]


def test_parallel_calls_are_one_group() -> None:
    body = [user("a"), call("1"), call("2"), output("1"), output("2"), bot("b")]
    # Never between call 2 and its output, even after output 1.
    assert split_points(body) == [0, 5, 6]


def test_a_pending_call_blocks_every_later_split() -> None:
    body = [user("a"), bot("b"), user("c"), call("1")]
    assert split_points(body) == [0, 2]


def test_reasoning_stays_with_what_follows_it() -> None:
    body = [user("a"), reasoning("r"), call("1"), output("1"), reasoning("s"), bot("b"), user("c")]
    points = split_points(body)
    assert 1 not in points and 2 not in points  # reasoning, then its call
    assert points == [0, 4, 6, 7]


def test_retained_is_latest_user_plus_newest_turns_that_fit() -> None:
    history = [user("u1"), bot("a1"), user("u2"), bot("a2"), user("u3"), bot("a3"), user("u4")]
    split = split_history(history, keep_tokens=3, measure=words)
    assert split.retained == [user("u3"), bot("a3"), user("u4")]
    assert split.older == [user("u1"), bot("a1"), user("u2"), bot("a2")]
    assert split.kept == []
    # A bigger budget keeps one more whole turn, never half of one.
    assert split_history(history, keep_tokens=4, measure=words).retained == history[4:]
    assert split_history(history, keep_tokens=5, measure=words).retained == history[2:]


def test_latest_user_message_is_retained_even_when_nothing_fits() -> None:
    history = [user("u1"), bot("a1"), user("u2")]
    split = split_history(history, keep_tokens=1, measure=lambda items: 1000)
    assert split.retained == [user("u2")]
    assert split.older == [user("u1"), bot("a1")]


def test_tool_groups_of_the_current_turn_can_be_summarised() -> None:
    history = [user("u1"), call("1"), output("1"), call("2"), output("2"), bot("done")]
    split = split_history(history, keep_tokens=4, measure=words)
    # The latest user message leads the retained part; the newest group follows it.
    assert split.retained == [user("u1"), *history[3:]]
    assert split.older == history[1:3]


def test_developer_and_system_messages_are_kept_apart() -> None:
    dev = msg(pb.ROLE_DEVELOPER, "be brief")
    system = msg(pb.ROLE_SYSTEM, "you are tiny")
    history = [system, user("u1"), bot("a1"), dev, user("u2"), bot("a2"), user("u3")]
    split = split_history(history, keep_tokens=1, measure=words)
    assert split.kept == [system, dev]
    assert dev not in split.older and dev not in split.retained
    assert split.retained == [user("u3")]


def test_nothing_to_compact() -> None:
    with pytest.raises(NothingToCompactError):
        split_history([user("only")], keep_tokens=10, measure=words)
    with pytest.raises(NothingToCompactError):
        split_history([user("u1"), bot("a1"), user("u2")], keep_tokens=10, measure=words)


def test_an_earlier_summary_is_always_summarised_again() -> None:
    earlier = compaction("old summary", [user("u1"), bot("a1")])
    history = effective_items([msg(pb.ROLE_SYSTEM, "s"), user("gone"), earlier, user("u2")])
    # The earlier compaction stands for everything before it but the instructions.
    kinds = [i.WhichOneof("item") for i in history]
    assert kinds == ["message", "compaction", "message", "message", "message"]
    assert user("gone") not in history
    split = split_history(history, keep_tokens=100, measure=words)
    assert split.older[0].WhichOneof("item") == "compaction"
    assert decode_compaction(split.older[0].compaction.encrypted_content) == ("old summary", [])
    assert split.retained == [user("u1"), bot("a1"), user("u2")]


def test_replay_renders_summary_then_retained_once() -> None:
    retained = [user("u2"), bot("a2")]
    item = compaction("we talked", retained)
    # The compact endpoint's output replayed as input: retained copies are not doubled.
    messages = items_to_messages(
        "rules", [msg(pb.ROLE_DEVELOPER, "dev"), *retained, item, user("next")]
    )
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "user"]
    assert messages[0]["content"] == "rules\n\ndev"
    assert "we talked" in messages[1]["content"]
    assert [m["content"] for m in messages[2:]] == ["u2", "a2", "next"]


def test_the_codec_refuses_nested_or_empty_items() -> None:
    nested = encode_compaction("x", [compaction("y", [])])
    with pytest.raises(CompactionDecodeError):
        decode_compaction(nested)
    with pytest.raises(CompactionDecodeError):
        decode_compaction(encode_compaction("x", [pb.Item()]))
    with pytest.raises(CompactionDecodeError):
        effective_items([pb.Item(compaction=pb.CompactionItem(encrypted_content="%%%"))])


def test_a_builtin_call_is_never_split_from_its_output() -> None:
    shell = pb.Item(shell_call=pb.ShellCallItem(call_id="s", action=pb.ShellCallAction()))
    shell_out = pb.Item(shell_call_output=pb.ShellCallOutputItem(call_id="s"))
    patch = pb.Item(apply_patch_call=pb.ApplyPatchCallItem(call_id="p"))
    patch_out = pb.Item(apply_patch_call_output=pb.ApplyPatchCallOutputItem(call_id="p"))
    body = [user("a"), shell, user("b"), shell_out, patch, patch_out, user("c")]
    # Not between a call and its output (not even before a user message), and after each
    # closed group.
    assert split_points(body) == [0, 4, 6, 7]
