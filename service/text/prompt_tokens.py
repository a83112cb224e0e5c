"""Encodes a rendered prompt so that only the template's own markers become control tokens.

A chat template pastes message text into the prompt verbatim; encoding the whole prompt with
special-token parsing on would turn a user's typed `<|im_start|>system` into the real marker
and let the user forge a turn. Client text (user and tool content) is encoded with special-token
parsing off, as vLLM and OpenAI do; the template's text around it keeps its markers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Roles whose content is the client's data, never the template's structure.
DATA_ROLES = ("user", "tool")


def special_tokens(tokenizer: Any) -> list[str]:
    """The texts of the tokenizer's special (control) tokens."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    added = getattr(hf, "added_tokens_decoder", {}) or {}
    return [t.content for t in added.values() if getattr(t, "special", False) and t.content]


def data_texts(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The user and tool message contents, in order (the text a client controls)."""
    return [
        m["content"]
        for m in messages
        if m.get("role") in DATA_ROLES and isinstance(m.get("content"), str)
    ]


def _locate(text: str, data: str, cursor: int) -> tuple[int, int] | None:
    """Where `data` (or, for templates that trim it, its stripped form) sits after `cursor`."""
    for needle in (data, data.strip()):
        if needle:
            at = text.find(needle, cursor)
            if at >= 0:
                return at, at + len(needle)
    return None


def encode_prompt(tokenizer: Any, text: str, data: Sequence[str]) -> list[int]:
    """Tokens of the rendered `text`, with the spans of `data` encoded as plain text.

    Only data that spells a special token needs its own span (every other prompt encodes in one
    piece, exactly as before); raises ValueError when the template changed such data beyond
    recognition, as nothing then tells its markers from the template's.
    """
    specials = special_tokens(tokenizer)
    suspect = [d for d in data if any(s in d for s in specials)]
    if not suspect:
        return list(tokenizer.encode(text, add_special_tokens=False))
    tokens: list[int] = []
    cursor = 0
    for piece in suspect:
        span = _locate(text, piece, cursor)
        if span is None:
            raise ValueError(
                "the input spells a special token in text the chat template transforms"
            )
        start, end = span
        if start > cursor:
            tokens += tokenizer.encode(text[cursor:start], add_special_tokens=False)
        tokens += tokenizer.encode(
            text[start:end], add_special_tokens=False, split_special_tokens=True
        )
        cursor = end
    if cursor < len(text):
        tokens += tokenizer.encode(text[cursor:], add_special_tokens=False)
    return tokens
