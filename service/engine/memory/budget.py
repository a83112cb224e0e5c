"""The process's memory budget (`--memory-limit`): what each model holds, and who may grow.

The budget covers the whole process as a user reads it in Activity Monitor or `ps`: the
runtime (the interpreter, its libraries, the server's own heap: what the process held beyond
MLX's arrays when the first model loaded), each loaded model's weights, the KV caches of its
live sequences, its prompt cache and (a vision model) its image-encoding cache. Each model's
KV store (kv_store.py) keeps its account here from its own engine thread; the lock makes the
sums consistent across models.

Live KV is reserved, not measured: a sequence is admitted with `prompt + max_output_tokens`
tokens (at most the context window), and a scheduler holds its sequences as one rectangle
(mlx-lm's batch pads every row to the longest, the fixed slots hold `rows x longest`), so a
model's live KV is `rows x bytes(longest reservation)`. While prompts are prefilled the
runtime also holds the step's activations (`kv_layout.Activations`), counted with them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from mlx_responses.service.engine.memory.kv_layout import STEP, Activations, KVLayout


def slot_rows(sequences: int, limit: int) -> int:
    """The rows the fixed slots hold for `sequences` (slots/store.py grows a store to a power of
    two up to 8 rows, then in steps of 8, at most `limit`: tests/unit/test_memory_budget.py
    holds the two together)."""
    if sequences <= 0:
        return 0
    grown = 1 << (sequences - 1).bit_length() if sequences <= 8 else -(-sequences // 8) * 8
    return max(sequences, min(limit, grown)) if limit else grown


class MemoryLimitError(Exception):
    """A request whose KV can never fit the budget, whatever else leaves (a 400)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


MIB = 1 << 20


def mib(n_bytes: int) -> str:
    return f"{n_bytes / MIB:,.0f} MiB"


def mib1(n_bytes: int) -> str:
    """MiB to a tenth: figures that are summed in one message."""
    return f"{n_bytes / MIB:,.1f} MiB"


@dataclass
class ModelAccount:
    """One model's share of the budget, kept by its KV store on the model's engine thread."""

    budget: MemoryBudget
    model: str
    layout: KVLayout
    context: int  # tokens a sequence may hold at most (the context window)
    weights: int = 0
    activations: Activations | None = None  # of a prefill step, while sequences are live
    # The rows a scheduler holds for n sequences: n (mlx-lm's batch), or the fixed slots'
    # growth (`slot_rows`) up to `max_rows`.
    slots: bool = False
    max_rows: int = 0
    scheduler_bytes: int = 0  # the live KV as the scheduler last reported it (a floor)
    prompt_cache: int = 0  # bytes of the prompt cache's memory tier
    image_cache: int = 0  # bytes of the image-encoding cache (vision/encoder.py)
    live: dict[int, int] = field(default_factory=dict)  # sequence -> tokens reserved

    def reservation(self, prompt: int, max_output: int) -> int:
        """Tokens a sequence reserves: its prompt and output, within the context window."""
        return max(1, min(prompt + max(0, max_output), max(self.context, prompt + 1)))

    def live_bytes(self, extra: int | None = None) -> int:
        """The live KV as the scheduler holds it (a rectangle) and a prefill step's
        activations, with a sequence of `extra` tokens admitted."""
        tokens = list(self.live.values()) + ([] if extra is None else [extra])
        return self.bytes_of(tokens)

    def bytes_of(self, tokens: list[int]) -> int:
        """What sequences of these reservations hold: `len x bytes(longest)` of KV, and the
        activations of a prefill step over them."""
        if not tokens:
            return 0
        longest = max(tokens)
        rows = slot_rows(len(tokens), self.max_rows) if self.slots else len(tokens)
        kv = max(rows * self.layout.bytes_for(longest), self.scheduler_bytes)
        kv += self._copy(kv)
        if self.activations is not None:
            kv += self.activations.bytes_for(len(tokens), longest)
        return kv

    def _copy(self, kv: int) -> int:
        """What a step holds beside live KV of `kv` bytes while it copies it: a cache grows,
        merges or is written by scatter one layer at a time (concatenate: the layer's old keys
        and values beside its new), so one layer's share."""
        return -(-kv // max(1, self.layout.layers))

    def check(self, prompt: int, max_output: int) -> None:
        """Raises MemoryLimitError if a sequence of `prompt` + `max_output` tokens could never
        fit: more than the budget less the runtime and this model's weights. The message names
        each part of what it needs (bytes_of's), so its figures add up."""
        limit = self.budget.limit
        if limit is None:
            return
        tokens = self.reservation(prompt, max_output)
        room = limit - self.budget.runtime - self.weights
        need = self.bytes_of([tokens])
        if need <= room:
            return
        param = "input" if self.bytes_of([prompt]) > room else "max_output_tokens"
        raise MemoryLimitError(
            f"This request needs {mib1(need)} for {tokens:,} tokens ({prompt:,} input + "
            f"{tokens - prompt:,} output tokens): {self._parts(tokens)}. That is more than "
            f"this server's memory budget leaves for one sequence: {mib1(max(0, room))} of "
            f"--memory-limit {mib1(limit)} after the model's weights ({mib1(self.weights)}) "
            f"and the runtime ({mib1(self.budget.runtime)}).",
            param,
        )

    def _parts(self, tokens: int) -> str:
        """What one sequence of `tokens` holds, part by part (summing to bytes_of's)."""
        kv = self.layout.bytes_for(tokens)
        held = -(-tokens // STEP) * STEP
        parts = [
            f"{mib1(kv)} of KV cache (held in steps of {STEP} tokens: {held:,} tokens at up to "
            f"{self.layout.bytes_per_token:,} bytes a token)"
        ]
        floor = max(kv, self.scheduler_bytes) - kv
        if floor:
            parts.append(f"{mib1(floor)} more that the scheduler's fixed slots hold already")
        parts.append(
            f"{mib1(self._copy(kv + floor))} while a layer's cache is copied as it grows "
            f"(1/{self.layout.layers} of it)"
        )
        if self.activations is not None:
            parts.append(
                f"{mib1(self.activations.bytes_for(1, tokens))} of activations for a prefill "
                f"step of {self.activations.step:,} tokens"
            )
        return " + ".join(parts)

    def check_room(self) -> None:
        """Raises MemoryLimitError where the budget leaves this model no room for the
        smallest sequence (one step of KV cache and a prefill step's activations) once its
        weights and the runtime are counted: no request could ever be served."""
        limit = self.budget.limit
        if limit is None:
            return
        least = self.bytes_of([STEP])
        room = limit - self.budget.runtime - self.weights
        if room >= least:
            return
        raise MemoryLimitError(
            f"--memory-limit {mib1(limit)} is too small for the model {self.model}: its "
            f"weights take {mib1(self.weights)} and the runtime {mib1(self.budget.runtime)}, "
            f"leaving {mib1(max(0, room))}, and the smallest request needs {mib1(least)} "
            f"({self._parts(STEP)}). Set --memory-limit to at least "
            f"{-(-(limit - room + least) // MIB):,} MiB, or leave it out.",
            "model",
        )

    def shortfall(self, tokens: int) -> int:
        """Bytes missing for one more sequence of `tokens` tokens now (0: it fits)."""
        with self.budget.lock:
            limit = self.budget.limit
            if limit is None:
                return 0
            others = self.budget.used(without=self)
            mine = self.weights + self.caches() + self.live_bytes(tokens)
            return max(0, others + mine - limit)

    def admit(self, sequence: int, tokens: int) -> None:
        with self.budget.lock:
            self.live[sequence] = tokens

    def release(self, sequence: int) -> None:
        with self.budget.lock:
            self.live.pop(sequence, None)

    def caches(self) -> int:
        """Bytes of the caches that give memory back when the budget is short: the prompt
        cache's memory tier and the image-encoding cache."""
        return self.prompt_cache + self.image_cache

    def cache_room(self) -> int | None:
        """Bytes the caches (`caches`) may hold now beside everything else (None: no
        budget)."""
        with self.budget.lock:
            limit = self.budget.limit
            if limit is None:
                return None
            others = self.budget.used(without=self)
            return max(0, limit - others - self.weights - self.live_bytes())

    def held(self) -> dict[str, int]:
        """This model's memory by kind: weights, kv (live, as reserved), prompt_cache (its
        memory tier and the disk writer's entries) and image_cache; they sum to what the
        budget counts."""
        with self.budget.lock:
            # As reserved: with a layer's copy and a prefill step's activations (bytes_of).
            kv = self.live_bytes() if self.live else self.scheduler_bytes
            return {
                "weights": self.weights,
                "kv": kv,
                "prompt_cache": self.prompt_cache,
                "image_cache": self.image_cache,
            }

    def close(self) -> None:
        """The model unloaded: its account leaves the budget."""
        self.budget.forget(self)


@dataclass
class MemoryBudget:
    """The process's budget (`limit` bytes; None: none) and every loaded model's account."""

    limit: int | None
    runtime: int = 0  # bytes the process holds beyond MLX's arrays (measured at first load)
    measure_runtime: Callable[[], int] | None = None
    on_measured: Callable[[int], None] | None = None  # sets MLX's limits (device.py)

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self._accounts: list[ModelAccount] = []
        self._measured = False

    def open(self, model: str, layout: KVLayout, context: int, weights: int) -> ModelAccount:
        """A new account for a model just loaded; the runtime is measured at the first."""
        with self.lock:
            if not self._measured and self.measure_runtime is not None:
                self.runtime = self.measure_runtime()
                self._measured = True
                if self.on_measured is not None:
                    self.on_measured(self.runtime)
            account = ModelAccount(self, model, layout, context, weights=weights)
            self._accounts.append(account)
            return account

    def forget(self, account: ModelAccount) -> None:
        with self.lock:
            if account in self._accounts:
                self._accounts.remove(account)

    def used(self, without: ModelAccount | None = None) -> int:
        """Bytes the budget counts now (the runtime and every account but `without`)."""
        with self.lock:
            total = self.runtime
            for a in self._accounts:
                if a is not without:
                    total += a.weights + a.caches() + a.live_bytes()
            return total

    def by_model(self) -> dict[str, dict[str, int]]:
        """Each loaded model's memory by kind (metrics)."""
        with self.lock:
            return {a.model: a.held() for a in self._accounts}
