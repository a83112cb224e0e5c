"""Training behind a long, shared system turn (Codex's ~18.4k tokens) without back-propagating
through it: the system turn runs once into the model's own caches (a full-attention KV cache and
the sliding layer's rotating one), and batches of the turns after it are learned on copies of
that cache, at their real positions. The gradient reaches the turns' own tokens and how they
attend to the system turn, not how the system turn's keys were computed; the cache is
recomputed with the current weights every few steps (and for another date and Codex home).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, RotatingKVCache

from training.tiny_harmony import codex

CHUNK = 2048
USER = "<|start|>user"


def system_turn(tokenizer: Any, date: str, home: str, context: str | None = None) -> str:
    """Codex's system turn as the template renders it (up to the first user message), and
    with ``context``, the environment context's user message after it."""
    messages = [{"role": "system", "content": codex.system_text(home)}]
    if context is not None:
        messages.append({"role": "user", "content": context})
    messages.append({"role": "user", "content": ""})
    text: str = tokenizer.apply_chat_template(
        messages, tools=codex.tools(), tokenize=False, current_date=date
    )
    return text[: text.rindex(USER)]


def encode_turn(tokenizer: Any, turn: codex.Turn, prefix: str) -> tuple[list[int], int]:
    """The ids after ``prefix`` of ``turn`` and where its last assistant turn starts in them."""
    last = max(i for i, m in enumerate(turn.messages) if m["role"] != "assistant")
    kwargs = {"tools": codex.tools(), "tokenize": False, "current_date": turn.date}
    prompt = tokenizer.apply_chat_template(
        turn.messages[: last + 1], add_generation_prompt=True, **kwargs
    )
    full = tokenizer.apply_chat_template(turn.messages, **kwargs)
    if not (full.startswith(prompt) and prompt.startswith(prefix)):
        raise ValueError("the system turn is not a prefix of the conversation")
    head = tokenizer.encode(prompt[len(prefix) :], add_special_tokens=False)
    tail = tokenizer.encode(full[len(prompt) :], add_special_tokens=False)
    return head + tail, len(head)


def prefill(model: Any, tokenizer: Any, prefix: str) -> list[Any]:
    """The model's caches after ``prefix`` (batch of one), evaluated."""
    ids = tokenizer.encode(prefix, add_special_tokens=False)
    cache = model.make_cache()
    for start in range(0, len(ids), CHUNK):
        model.model(mx.array([ids[start : start + CHUNK]]), cache=cache)  # no logits
        mx.eval([c.state for c in cache])
    return list(cache)


def copies(cache: list[Any], batch: int) -> list[Any]:
    """``batch`` rows of each cache, as fresh cache objects (a step appends to them)."""
    out: list[Any] = []
    for c in cache:
        if isinstance(c, RotatingKVCache):
            fresh: Any = RotatingKVCache(c.max_size, c.keep)
            keys, values = c.keys, c.values
            fresh.offset, fresh._idx = c.offset, c._idx
        else:
            fresh = KVCache()
            keys, values = c.keys[..., : c.offset, :], c.values[..., : c.offset, :]
            fresh.offset = c.offset
        fresh.keys = mx.repeat(keys, batch, axis=0)
        fresh.values = mx.repeat(values, batch, axis=0)
        out.append(fresh)
    return out
