"""Where a history may be cut for compaction.

Pure: items in, items out; token counts come from the caller's `measure`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlx_responses.service.text.builtin_tools import CALL_KINDS, OUTPUT_KINDS
from mlx_responses.service.text.compaction_items import is_instruction

from mlx_responses.v1 import responses_pb2 as pb

Measure = Callable[[Sequence[pb.Item]], int]


class NothingToCompactError(ValueError):
    """The history holds nothing older than the part compaction must retain."""


def is_user(item: pb.Item) -> bool:
    """A user message: a new turn starts here."""
    return item.WhichOneof("item") == "message" and item.message.role == pb.ROLE_USER


def split_points(body: Sequence[pb.Item]) -> list[int]:
    """Indices `s` where body[:s] may be summarised and body[s:] kept, oldest first.

    A split falls only before a user message or after a completed tool group (every call
    so far has its output), so a function call is never separated from its output. The end
    of the body counts as the point before the next user turn; 0 (everything retained)
    counts too, unless the body opens with an earlier summary, which is always summarised
    again.
    """
    points = [0] if body and body[0].WhichOneof("item") != "compaction" else []
    pending: set[str] = set()
    for s in range(1, len(body) + 1):
        previous = body[s - 1]
        kind = previous.WhichOneof("item")
        if kind in ("function_call", "custom_tool_call", *CALL_KINDS):
            pending.add(getattr(previous, kind).call_id)
        elif kind in ("function_call_output", "custom_tool_call_output", *OUTPUT_KINDS):
            pending.discard(getattr(previous, kind).call_id)
        if pending:
            continue
        at_end = s == len(body)
        closes_group = kind in ("function_call_output", "custom_tool_call_output", *OUTPUT_KINDS)
        if at_end or is_user(body[s]) or closes_group:
            points.append(s)
    return points


@dataclass(frozen=True)
class Split:
    """A history cut in three: kept instructions, the part to summarise, the retained part."""

    kept: list[pb.Item]
    older: list[pb.Item]
    retained: list[pb.Item]


def split_history(items: Sequence[pb.Item], keep_tokens: int, measure: Measure) -> Split:
    """Splits an (expanded) history for compaction.

    The retained part is the latest user message plus the newest whole turns (or completed
    tool groups) whose measured tokens, together with that message, fit `keep_tokens`; the
    latest user message is retained even when it alone does not fit. System and developer
    messages are kept apart. Raises NothingToCompactError when nothing older remains.
    """
    kept = [item for item in items if is_instruction(item)]
    body = [item for item in items if not is_instruction(item)]
    users = [i for i, item in enumerate(body) if is_user(item)]
    latest_user = users[-1] if users else None

    def retained_at(s: int) -> list[pb.Item]:
        if latest_user is not None and s > latest_user:
            return [body[latest_user], *body[s:]]
        return body[s:]

    points = split_points(body)
    if not points:
        raise NothingToCompactError(
            "There is nothing to compact: no turn of the history can be cut from the rest."
        )
    chosen = points[-1]
    for s in reversed(points[:-1]):
        if measure(retained_at(s)) > keep_tokens:
            break
        chosen = s
    # The latest user message is retained, never summarised as well.
    older = [item for i, item in enumerate(body[:chosen]) if i != latest_user]
    if not older:
        raise NothingToCompactError(
            "There is nothing to compact: the whole history fits in the retained part."
        )
    return Split(kept=kept, older=older, retained=retained_at(chosen))
