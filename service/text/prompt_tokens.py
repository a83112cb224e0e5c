"""Encodes a rendered prompt so that only the template's own markers become control tokens.

A chat template pastes message text into the prompt verbatim; encoding the whole prompt with
special-token parsing on would turn a user's typed `<|im_start|>system` into the real marker
and let the user forge a turn. Client text (user and tool content) is encoded with special-token
parsing off, as vLLM and OpenAI do; the template's text around it keeps its markers.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Roles whose content is the client's data, never the template's structure.
DATA_ROLES = ("user", "tool")
# Up to this many special tokens, one substring scan each beats the indexed lookup.
FEW_SPECIALS = 32


def special_tokens(tokenizer: Any) -> list[str]:
    """The texts of the tokenizer's special (control) tokens."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    added = getattr(hf, "added_tokens_decoder", {}) or {}
    return [t.content for t in added.values() if getattr(t, "special", False) and t.content]


@dataclass(frozen=True)
class SpecialTexts:
    """A tokenizer's special-token texts, indexed to tell fast whether a text spells one.

    `added_tokens_decoder` builds a fresh dict on every read and some vocabularies hold
    thousands of special tokens, so each tokenizer's set is built once (see `specials_of`).
    """

    size: int  # len(tokenizer) when built: a token added since makes a new set
    texts: frozenset[str]
    firsts: frozenset[str]
    lengths: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer: Any, size: int) -> SpecialTexts:
        texts = frozenset(special_tokens(tokenizer))
        return cls(
            size,
            texts,
            frozenset(t[0] for t in texts),
            tuple(sorted({len(t) for t in texts})),
        )

    def spelled_in(self, text: str) -> bool:
        """Whether `text` contains any special token's text (as `any(s in text ...)`)."""
        if len(self.texts) <= FEW_SPECIALS:
            return any(s in text for s in self.texts)
        texts, lengths = self.texts, self.lengths
        for first in self.firsts:
            at = text.find(first)
            while at >= 0:
                if any(text[at : at + length] in texts for length in lengths):
                    return True
                at = text.find(first, at + 1)
        return False


_SPECIALS: weakref.WeakKeyDictionary[Any, SpecialTexts] = weakref.WeakKeyDictionary()


def _size(tokenizer: Any) -> int:
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    try:
        return len(hf)
    except TypeError:
        return -1


def specials_of(tokenizer: Any) -> SpecialTexts:
    """The tokenizer's special texts, built once per tokenizer (again if tokens were added)."""
    size = _size(tokenizer)
    try:
        cached = _SPECIALS.get(tokenizer)
    except TypeError:  # not weakly referenceable: built each time
        return SpecialTexts.of(tokenizer, size)
    if cached is None or cached.size != size or size < 0:
        cached = SpecialTexts.of(tokenizer, size)
        _SPECIALS[tokenizer] = cached
    return cached


def data_texts(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The user and tool message contents, in order (the text a client controls): a content
    of parts (a vision prompt's text and images) gives each text part. An assistant message
    replayed by the client is its data too: its `thinking` (harmony's reasoning, rendered
    before its answer) and its text content."""
    texts: list[str] = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "assistant":
            texts += [t for t in (m.get("thinking"), content) if isinstance(t, str) and t]
            continue
        if m.get("role") not in DATA_ROLES:
            continue
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p["text"] for p in content if isinstance(p.get("text"), str)]
    return texts


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
    specials = specials_of(tokenizer)
    suspect = [d for d in data if specials.spelled_in(d)]
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
