"""Which scheduler serves which of mlx-lm's caches (docs/concepts/architecture.md, "Which models
need the batch engine"): the slots hold plain KV and sliding windows, one per layer (gemma3's
mixed layers decode the batch engine's tokens); recurrent state goes to mlx-lm's batch, which
batches it as it decodes it alone."""

from __future__ import annotations

import copy
import importlib
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.scheduler import Admission
from mlx_responses.service.engine.schedulers import resolve_engine
from mlx_responses.service.engine.sliding_window import apply_window
from mlx_responses.service.engine.slots import SlotScheduler, layer_windows, slots_serve

from tests.support.random_model import tiny_qwen3

# Two sliding layers of 8 positions, then a full one, twice (gemma3's layout).
GEMMA3 = {
    "hidden_size": 32,
    "num_hidden_layers": 6,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 16,
    "vocab_size": 64,
    "sliding_window": 8,
    "sliding_window_pattern": 3,
}
# Sliding and full layers alternating, attention sinks and a mixture of experts (gpt-oss's).
GPT_OSS = {
    "hidden_size": 32,
    "num_hidden_layers": 4,
    "intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "vocab_size": 64,
    "num_local_experts": 2,
    "num_experts_per_tok": 1,
    "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
}
MIXED = {
    "gemma3_text": (GEMMA3, [8, 8, None, 8, 8, None]),
    "gpt_oss": (GPT_OSS, [8, None, 8, None]),
}
# Tiny random models of mlx-lm architectures whose caches the slots do not hold.
NOT_SLOTS = {
    # Recurrent state only.
    "mamba": {
        "vocab_size": 32,
        "hidden_size": 16,
        "intermediate_size": 32,
        "state_size": 4,
        "num_hidden_layers": 2,
        "conv_kernel": 4,
        "use_bias": False,
        "use_conv_bias": True,
        "time_step_rank": 2,
    },
    # Convolution state and one attention layer.
    "lfm2": {
        "vocab_size": 32,
        "hidden_size": 16,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 64,
        "norm_eps": 1e-5,
        "conv_bias": False,
        "conv_L_cache": 3,
        "block_dim": 16,
        "block_multiple_of": 16,
        "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False,
        "full_attn_idxs": [1],
        "block_ff_dim": 32,
    },
}
CACHES = {
    "mamba": {"ArraysCache"},
    "lfm2": {"ArraysCache", "KVCache"},
}


def _model(kind: str, config: dict[str, Any] | None = None) -> Any:
    module = importlib.import_module(f"mlx_lm.models.{kind}")
    mx.random.seed(0)
    args = {"model_type": kind, **(NOT_SLOTS[kind] if config is None else config)}
    return module.Model(module.ModelArgs.from_dict(args))


def _argmax(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


def _decode(model: Any, prompts: list[list[int]], tokens: int) -> list[list[int]]:
    """Greedy tokens of `prompts`, admitted together, through the batch engine's protocol."""
    scheduler = BatchScheduler(
        model,
        stop_tokens=[],
        completion_batch_size=4,
        prefill_batch_size=4,
        prefill_step_size=64,
    )
    out, _ = _run(
        scheduler, [Admission(uid, [p], tokens, _argmax) for uid, p in enumerate(prompts)]
    )
    scheduler.close()
    return [out[uid] for uid in range(len(prompts))]


def _run(
    scheduler: Any,
    first: list[Admission],
    late: list[Admission] = (),  # type: ignore[assignment]
) -> tuple[dict[int, list[int]], dict[int, Any]]:
    """Steps until all finished, admitting `late` at the fifth step: each one's tokens, and
    its finishing token (its prompt-cache entry)."""
    for admission in first:
        scheduler.admit(admission)
    out: dict[int, list[int]] = {a.uid: [] for a in [*first, *late]}
    ends: dict[int, Any] = {}
    steps = 0
    while len(ends) < len(out):
        steps += 1
        if steps == 5:
            for admission in late:
                scheduler.admit(admission)
        for token in scheduler.step().tokens:
            out[token.uid].append(token.token)
            if token.finish_reason is not None:
                ends[token.uid] = token
    return out, ends


@pytest.mark.parametrize("kind", sorted(NOT_SLOTS))
def test_recurrent_state_needs_the_batch_engine(kind: str) -> None:
    model = _model(kind)
    assert {type(c).__name__ for c in make_prompt_cache(model)} == CACHES[kind]
    assert not slots_serve(model)
    for device in ("cpu", "gpu"):
        assert resolve_engine("auto", model, device) == "batch"
    with pytest.raises(ValueError, match="--engine slots needs plain KV caches"):
        resolve_engine("slots", model, "cpu")
    # The batch engine decodes them batched as it does alone (ragged prompts).
    prompts = [[(7 * j + 3 * k) % 30 + 1 for j in range(n)] for k, n in enumerate((5, 19))]
    together = _decode(model, prompts, 12)
    assert together == [_decode(model, [p], 12)[0] for p in prompts]
    assert all(len(t) == 12 for t in together)


@pytest.mark.parametrize("kind", sorted(MIXED))
def test_the_slots_decode_mixed_windows_as_mlx_lms_batch(kind: str) -> None:
    """Sliding and full layers side by side, each attending over its own window: prompts past
    the window prefilled in chunks, late arrivals, then a second turn from each engine's
    prompt-cache entries (either engine's entry restored in either), the same tokens."""
    config, windows = MIXED[kind]
    model = _model(kind, config)
    assert {type(c).__name__ for c in make_prompt_cache(model)} == {"KVCache", "RotatingKVCache"}
    assert layer_windows(model) == windows
    # Served when asked; `auto` keeps the batch for them (not measured faster on the slots).
    assert resolve_engine("slots", model, "cpu") == "slots"
    assert resolve_engine("auto", model, "cpu") == "batch"

    def prompt(n: int, seed: int) -> list[int]:
        return [(7 * j + 3 * seed) % 60 + 1 for j in range(n)]

    def admissions(prompts: list[list[int]], start: int = 0, **kw: Any) -> list[Admission]:
        return [Admission(start + i, [p], 24, _argmax, **kw) for i, p in enumerate(prompts)]

    def scheduler_of(engine: str) -> BatchScheduler | SlotScheduler:
        make = BatchScheduler if engine == "batch" else SlotScheduler
        return make(
            model,
            stop_tokens=[],
            completion_batch_size=8,
            prefill_batch_size=8,
            prefill_step_size=7,  # chunks that end inside and past the window
        )

    outputs, entries = {}, {}
    for engine in ("batch", "slots"):
        scheduler = scheduler_of(engine)
        first = admissions([prompt(3, 0), prompt(19, 1), prompt(40, 2)])
        late = admissions([prompt(11, 3), prompt(27, 4)], start=3)
        outputs[engine], entries[engine] = _run(scheduler, first, late)
        scheduler.close()
    assert outputs["slots"] == outputs["batch"]
    # Second turns: each entry (batch's for uid 2, slots' for uid 1) extended by new tokens,
    # into both engines.
    turns = {}
    for engine in ("batch", "slots"):
        scheduler = scheduler_of(engine)
        follow = []
        for uid, (source, which) in enumerate((("batch", 2), ("slots", 1))):
            end = entries[source][which]
            cached = list(end.all_tokens)
            copied = [copy.deepcopy(c) for c in end.prompt_cache]
            follow.append(Admission(uid, [prompt(9, 5 + uid)], 12, _argmax, [], copied, cached))
        turns[engine], _ = _run(scheduler, follow)
    assert turns["slots"] == turns["batch"]


@pytest.mark.parametrize("window", [None, 8])
def test_plain_caches_and_one_window_fit_the_slots(window: int | None) -> None:
    model = tiny_qwen3()
    if window is not None:
        # Qwen's way of declaring it: every layer slides over `window` tokens.
        config = {"sliding_window": window, "num_hidden_layers": 3, "use_sliding_window": True}
        assert apply_window(model, {**config, "max_window_layers": 0}, "tiny") == window
    assert slots_serve(model)
    assert resolve_engine("auto", model, "cpu") == "slots"
    assert resolve_engine("auto", model, "gpu") == "batch"  # not measured on a GPU yet
