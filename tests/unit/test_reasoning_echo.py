"""The reasoning echo puts back the reasoning of a reply the client replays without it: the same
reply to the same turn, never a reply of the same text elsewhere."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TypeVar

from mlx_responses.service.ids import OWNER, owner_of
from mlx_responses.service.responses.reasoning_echo import ReasoningEcho

from mlx_responses.v1 import responses_pb2 as pb


def user(text: str) -> pb.Item:
    return pb.Item(
        message=pb.MessageItem(
            role=pb.ROLE_USER, content=[pb.ContentPart(input_text=pb.InputText(text=text))]
        )
    )


def reply(text: str, item_id: str = "") -> pb.Item:
    return pb.Item(
        message=pb.MessageItem(
            id=item_id,
            role=pb.ROLE_ASSISTANT,
            content=[pb.ContentPart(output_text=pb.OutputText(text=text))],
        )
    )


def reasoning(text: str) -> pb.Item:
    return pb.Item(reasoning=pb.ReasoningItem(content=[pb.ReasoningText(text=text)]))


T = TypeVar("T")


def as_key(key: str, call: Callable[[], T]) -> T:
    """`call` as an RPC of `key` runs it under --isolate-keys."""
    context = contextvars.copy_context()
    context.run(OWNER.set, owner_of(key))
    return context.run(call)


def kinds(items: list[pb.Item]) -> list[str]:
    return [str(i.WhichOneof("item")) for i in items]


def test_a_replayed_reply_gets_its_reasoning_back() -> None:
    echo = ReasoningEcho(1 << 20)
    echo.remember([user("Reply with: sunny")], [reasoning("they want sunny"), reply("sunny")])
    # Replayed without the reasoning item, and with an id the client gave it.
    restored = echo.restore([user("Reply with: sunny"), reply("sunny", "msg_1"), user("next")])
    assert kinds(restored) == ["message", "reasoning", "message", "message"]
    assert restored[1].reasoning.content[0].text == "they want sunny"


def test_the_same_text_answering_another_turn_gets_none() -> None:
    """Another conversation (or another client) whose assistant said the same words."""
    echo = ReasoningEcho(1 << 20)
    echo.remember([user("Reply with: sunny")], [reasoning("secret thoughts"), reply("sunny")])
    elsewhere = [user("What is the weather?"), reply("sunny"), user("thanks")]
    assert kinds(echo.restore(elsewhere)) == ["message", "message", "message"]
    first_turn = [reply("sunny")]  # no turn before it at all
    assert kinds(echo.restore(first_turn)) == ["message"]


def test_a_reply_that_kept_its_reasoning_is_left_alone() -> None:
    echo = ReasoningEcho(1 << 20)
    echo.remember([user("q")], [reasoning("r"), reply("a")])
    items = [user("q"), reasoning("r"), reply("a")]
    assert kinds(echo.restore(items)) == kinds(items)


def test_disabled_echo_restores_nothing() -> None:
    echo = ReasoningEcho(0)
    echo.remember([user("q")], [reasoning("r"), reply("a")])
    assert kinds(echo.restore([user("q"), reply("a")])) == ["message", "message"]


def test_with_isolated_keys_a_reply_gets_only_its_own_keys_reasoning() -> None:
    """Another key replaying the same turn and reply word for word gets none of it."""
    echo = ReasoningEcho(1 << 20)
    turn = [user("Reply with: sunny")]
    as_key("sk-a", lambda: echo.remember(turn, [reasoning("a's thoughts"), reply("sunny")]))
    replay = [*turn, reply("sunny"), user("next")]
    assert kinds(as_key("sk-b", lambda: echo.restore(replay))) == ["message"] * 3
    assert kinds(echo.restore(replay)) == ["message"] * 3  # nor a core without isolation
    restored = as_key("sk-a", lambda: echo.restore(replay))
    assert restored[1].reasoning.content[0].text == "a's thoughts"
