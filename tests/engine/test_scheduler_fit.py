"""Which scheduler serves which of mlx-lm's caches (docs/concepts/architecture.md, "Which models
need the batch engine"): the slots hold plain KV and one sliding window on every layer; mixed
windows and recurrent state go to mlx-lm's batch, which batches them as it decodes them alone."""

from __future__ import annotations

import importlib
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine.batch.scheduler import BatchScheduler
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.scheduler import Admission
from mlx_responses.service.engine.schedulers import resolve_engine
from mlx_responses.service.engine.sliding_window import apply_window
from mlx_responses.service.engine.slots import slots_serve

from tests.support.random_model import tiny_qwen3

# Tiny random models of mlx-lm architectures whose caches the slots do not hold.
NOT_SLOTS = {
    # Five sliding layers of 8 positions, then a full one.
    "gemma3_text": {
        "hidden_size": 16,
        "num_hidden_layers": 6,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "vocab_size": 32,
        "sliding_window": 8,
        "sliding_window_pattern": 6,
    },
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
    "gemma3_text": {"KVCache", "RotatingKVCache"},
    "mamba": {"ArraysCache"},
    "lfm2": {"ArraysCache", "KVCache"},
}


def _model(kind: str) -> Any:
    module = importlib.import_module(f"mlx_lm.models.{kind}")
    mx.random.seed(0)
    return module.Model(module.ModelArgs.from_dict({"model_type": kind, **NOT_SLOTS[kind]}))


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
    for uid, prompt in enumerate(prompts):
        scheduler.admit(Admission(uid, [prompt], tokens, _argmax))
    out: dict[int, list[int]] = {uid: [] for uid in range(len(prompts))}
    finished: set[int] = set()
    while len(finished) < len(prompts):
        for token in scheduler.step().tokens:
            out[token.uid].append(token.token)
            if token.finish_reason is not None:
                finished.add(token.uid)
    scheduler.close()
    return [out[uid] for uid in range(len(prompts))]


@pytest.mark.parametrize("kind", sorted(NOT_SLOTS))
def test_mixed_windows_and_recurrent_state_need_the_batch_engine(kind: str) -> None:
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
