"""Where a client's cache breakpoints end in a rendered prompt's tokens.

Anthropic's `cache_control` and OpenAI's `prompt_cache_breakpoint` mark the block a reusable
prefix ends with (a system block, a tool definition, a message's content block). The façade
carries them as `CreateResponseParams.cache_breakpoints`; here each becomes a token position,
found as `system_turn_end` finds the system turn's: the template renders the conversation up
to and including the marked block, and the position is where that rendering parts from the
prompt's tokens. A prefix rendered alone may tokenize differently at its end (a merge across
the cut); the common prefix then stops before it, so a position is always a prefix of the
prompt and of any other prompt rendering the same conversation up to that block.

Only models whose caches cannot be cut back take them (the engine's checkpoints): a plain KV
cache serves any prefix of an entry already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlx_responses.service.text.prompt import (
    Message,
    common_prefix,
    items_to_messages,
    render_probe,
    tools_to_template,
)
from mlx_responses.service.text.retention import Retention

from mlx_responses.v1 import responses_pb2 as pb

# The breakpoints one prompt takes (Anthropic refuses more than four `cache_control` blocks;
# OpenAI writes at most four per request): the deepest ones.
MAX_BREAKPOINTS = 4


@dataclass(frozen=True)
class Mark:
    """A breakpoint against a context: after the function tool `tool`, or after the item at
    `item` in the context (after its first `chars` characters of text, for a message)."""

    tool: str | None = None
    item: int = -1
    chars: int | None = None
    ttl: int | None = None  # seconds its entry is kept after its last use (None: not stated)

    @property
    def depth(self) -> tuple[int, int]:
        """Its order in the prompt without rendering: tools (in the system turn) first, then
        items and their text in order (a whole item after any part of it)."""
        if self.tool is not None:
            return (-1, 0)
        return (self.item, self.chars if self.chars is not None else 1 << 62)


def resolve_marks(
    breakpoints: Sequence[pb.CacheBreakpoint],
    request_input: Sequence[pb.Item],
    context: Sequence[pb.Item],
) -> list[Mark]:
    """The request's breakpoints against the context it renders (the history, then the
    request's input items, the very objects; items a compaction dropped lose theirs)."""
    where = {id(item): k for k, item in enumerate(context)}
    marks = []
    for point in breakpoints:
        kind = point.WhichOneof("at")
        ttl = point.ttl_seconds if point.HasField("ttl_seconds") else None
        if kind == "tool":
            marks.append(Mark(tool=point.tool, ttl=ttl))
        elif kind == "input" and point.input.item < len(request_input):
            k = where.get(id(request_input[point.input.item]))
            if k is not None:
                chars = point.input.chars if point.input.HasField("chars") else None
                marks.append(Mark(item=k, chars=chars, ttl=ttl))
    return marks


def _cut(item: pb.Item, chars: int) -> pb.Item:
    """A message item holding only the first `chars` characters of its text."""
    cut = pb.Item()
    cut.CopyFrom(item)
    left = chars
    for part in cut.message.content:
        kind = part.WhichOneof("part")
        holder = getattr(part, kind) if kind else None
        field = {"input_text": "text", "output_text": "text", "refusal": "refusal"}.get(kind or "")
        if holder is None or field is None:
            continue
        text = getattr(holder, field)
        setattr(holder, field, text[:left])
        left -= len(getattr(holder, field))
    return cut


def _probe_messages(
    instructions: str | None, items: Sequence[pb.Item], mark: Mark
) -> list[Message]:
    """The conversation up to and including the marked block."""
    if mark.tool is not None:  # the tools render within the system turn
        messages = items_to_messages(instructions, items)
        head = messages[:1] if messages and messages[0]["role"] == "system" else []
        return [*head, {"role": "user", "content": ""}]
    last = items[mark.item]
    if mark.chars is not None and last.WhichOneof("item") == "message":
        last = _cut(last, mark.chars)
    messages = items_to_messages(instructions, [*items[: mark.item], last])
    if messages and messages[-1]["role"] == "system":
        # As `system_turn_end`: the system turn ends where the next turn opens.
        messages.append({"role": "user", "content": ""})
    return messages


def breakpoint_positions(
    tokenizer: Any,
    tokens: list[int],
    marks: Sequence[Mark],
    *,
    instructions: str | None,
    items: Sequence[pb.Item],
    tools: Sequence[pb.Tool],
    tool_parameters: Mapping[str, Any],
    template_kwargs: dict[str, Any],
) -> tuple[int, ...]:
    """The token positions in `tokens` (the prompt) where the marked prefixes end: the deepest
    `MAX_BREAKPOINTS`, each inside the prompt (a probe the template refuses gives none)."""
    found = mark_positions(
        tokenizer,
        tokens,
        marks,
        instructions=instructions,
        items=items,
        tools=tools,
        tool_parameters=tool_parameters,
        template_kwargs=template_kwargs,
    )
    inside = sorted({p for p in found if p is not None and 0 < p < len(tokens)})
    return tuple(inside[-MAX_BREAKPOINTS:])


def mark_positions(
    tokenizer: Any,
    tokens: list[int],
    marks: Sequence[Mark],
    *,
    instructions: str | None,
    items: Sequence[pb.Item],
    tools: Sequence[pb.Tool],
    tool_parameters: Mapping[str, Any],
    template_kwargs: dict[str, Any],
) -> list[int | None]:
    """Where each marked prefix ends in `tokens` (None: the template refused its probe, or it
    names a tool the request does not have)."""
    positions: list[int | None] = []
    names = [t.function.name if t.WhichOneof("tool") == "function" else None for t in tools]
    for mark in marks:
        shown = list(tools)
        if mark.tool is not None:
            if mark.tool not in names:
                positions.append(None)
                continue
            shown = shown[: names.index(mark.tool) + 1]
        rendered = tools_to_template(shown, tool_parameters) if shown else None
        probe = render_probe(
            tokenizer, _probe_messages(instructions, items, mark), rendered, template_kwargs
        )
        positions.append(None if probe is None else common_prefix(probe, tokens))
    return positions


def mark_retention(
    marks: Sequence[Mark],
    positions: Sequence[int | None] | None,
    *,
    request_ttl: float | None,
    memory_only: bool,
    merged: bool,
) -> Retention:
    """The lifetimes of a request's entries (service/text/retention.py): its marks with where
    they end in the prompt (`positions`, None where not looked for), its own ttl, `merged` for
    a cache that keeps one entry holding every marked prefix. The marks go in prompt order: by
    position where found (a template may render the tools after the system text), else by
    their place in the request."""
    found = list(positions) if positions is not None else [None] * len(marks)
    ordered = sorted(
        zip(marks, found, strict=True),
        key=lambda pair: (-1 if pair[1] is None else pair[1], pair[0].depth),
    )
    return Retention.of(
        request_ttl,
        [(p, mark.ttl) for mark, p in ordered],
        merged=merged,
        memory_only=memory_only,
    )
