"""What crosses into the engine thread: the commands its queue carries (`worker.py` reads them
in one place, `_next_commands`; a distributed group's rank 0 sends them to the other ranks)."""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.model_thread import Stop
from mlx_responses.service.engine.prompt_cache.expiry import Lifetimes
from mlx_responses.service.engine.requests import (
    EngineStoppedError,
    LogitsProcessor,
    SamplingParams,
)
from mlx_responses.service.engine.stream import GenerationStream
from mlx_responses.service.engine.warm_up import WarmUp
from mlx_responses.service.flags import PROMPT_CHECKPOINT_TOKENS

# The most checkpoints one prompt's prefill leaves entries at: the system turn's end, a client's
# four cache breakpoints, where it parts from its prompt_cache_key's last (key_prefixes.py) and
# where its generation prompt begins.
MAX_CHECKPOINTS = 7
# Where a long prompt's prefill leaves entries besides them (a model whose caches cannot be
# trimmed): every this many tokens, the deepest few (`EngineWorker.checkpoint_interval`,
# --prompt-checkpoint-tokens).
CHECKPOINT_INTERVAL: int = PROMPT_CHECKPOINT_TOKENS.default
MAX_INTERVAL_CHECKPOINTS = 4


@dataclass
class Submit:
    """A request for the engine thread: generate from `prompt`."""

    stream: GenerationStream
    prompt: list[int]
    sampling: SamplingParams
    logits_processors: list[LogitsProcessor]
    checkpoints: tuple[int, ...] = ()  # prompt positions whose cache is worth an entry
    submitted_at: float = field(default_factory=time.perf_counter)
    scope: str = ""  # whose prompt-cache entries it may use and leaves (--isolate-keys)
    vision: VisionInputs | None = None  # a vision model's images (vision/side.py)
    retention: Lifetimes | None = None  # how long its entries are kept (None: LRU only)


def stops(command: Submit, cached: int, every: int) -> list[int]:
    """Where `command`'s prefill leaves entries, for a model whose caches cannot be trimmed:
    its checkpoints and every `every` tokens (0: none; the deepest `MAX_INTERVAL_CHECKPOINTS`,
    so a prompt edited or compacted inside a long one starts from the last before the change),
    past what was `cached` and before the prompt's last token."""
    end = len(command.prompt) - 1
    intervals = range(every, end, every) if every > 0 else range(0)
    points = {*command.checkpoints, *intervals[-MAX_INTERVAL_CHECKPOINTS:]}
    return sorted(p for p in points if cached < p < end)


@dataclass
class Cancel:
    """Drop `stream`'s sequence before the next step."""

    stream: GenerationStream


Command = Submit | Cancel | WarmUp | Stop


def unserved(
    commands: queue.SimpleQueue[Any], waiting: Sequence[Submit], read: Iterable[Command] = ()
) -> list[GenerationStream]:
    """When the engine's loop has ended: the streams of `waiting` (for memory), of the
    requests it had `read` and not taken, and of those still queued in `commands`; a warm-up
    among them is told the engine stopped."""
    streams = [command.stream for command in waiting]
    left = list(read)
    with contextlib.suppress(queue.Empty):
        while True:
            left.append(commands.get_nowait())
    for command in left:
        if isinstance(command, Submit):
            streams.append(command.stream)
        elif isinstance(command, WarmUp) and not command.done.done():
            command.done.set_exception(EngineStoppedError("the engine stopped"))
    return streams
