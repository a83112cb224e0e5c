"""What mlx-lm's batch cannot do for an architecture, in one place (the zoo finds each row).

mlx-lm's BatchGenerator batches any model whose caches merge and split per row, but some
architectures decode wrong in a batch (mlx-lm 0.32, `tests/zoo/` compares every architecture
four at once with each alone): their recurrent or reused layers read the left padding that a
batch gives its shorter prompts, or their positions read a cache's offset as one number. Those,
and models whose caches cannot merge (no `merge`: a chunked window, DeepSeek-V4's layer cache),
decode one sequence at a time (`solo/serial.py`): mlx-lm's own greedy tokens, queued.
"""

from __future__ import annotations

from typing import Any

from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache

# model_type -> why mlx-lm 0.32's batch decodes it wrong (report upstream).
BATCHES_WRONG = {
    "afm7": "its KV-reusing layers read the batch's left padding",
    "bailing_moe_linear": "its linear-attention state takes in the batch's left padding",
    "jamba": "its mamba state takes in the batch's left padding",
    "longcat_flash_ngram": "its n-gram embeddings and state take in the batch's left padding",
    "olmo_hybrid": "its linear-attention state takes in the batch's left padding",
    "gpt_bigcode": "its position ids read the cache offset as one number (a batch holds one a row)",
}


def model_type(model: Any) -> str | None:
    """The config's `model_type` of an mlx-lm model."""
    found = getattr(model, "model_type", None) or getattr(
        getattr(model, "args", None), "model_type", None
    )
    return found if isinstance(found, str) else None


def why_not_batched(model: Any) -> str | None:
    """Why mlx-lm's batch cannot decode `model` right (None: it can)."""
    if (reason := BATCHES_WRONG.get(model_type(model) or "")) is not None:
        return reason
    for cache in make_prompt_cache(model):
        if not hasattr(cache, "merge"):
            return f"its {type(cache).__name__} cannot join a batch with history"
    return None


# model_type -> how it crashes the process on a CPU (a segfault: no error to catch), so the
# engine refuses it there at load (report upstream).
CRASHES_ON_CPU = {
    "phi3small": "its block-sparse attention crashes MLX (a segfault) on a prompt of 16 tokens",
}


def why_unservable(model: Any, device: str) -> str | None:
    """Why the engine refuses `model` on `device` ("cpu", "gpu") at load (None: it serves)."""
    if device == "cpu":
        return CRASHES_ON_CPU.get(model_type(model) or "")
    return None
