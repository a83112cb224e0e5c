"""A tiny random gpt-oss (mlx-lm's gpt_oss: sliding and full layers, sinks, experts) that speaks
harmony: the tokenizer and template of training/tiny_harmony, in the mlx-lm folder layout.

Its output is random text; tests script it token by token with `Script`, a logits processor
put in front of the engine's own (`scripted`), so a harmony fixture runs through the real
engine, detokenizer, stop tokens and pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mlx_responses.service.config import BUNDLED_MODEL

from training.tiny_harmony.tokenizer import write_tokenizer


def build_random_gpt_oss(out: Path, *, seed: int = 0) -> Path:
    """Writes config.json, model.safetensors and the harmony tokenizer files into `out`."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import gpt_oss

    write_tokenizer(BUNDLED_MODEL, out)
    vocab = json.loads((BUNDLED_MODEL / "config.json").read_text())["vocab_size"]
    config = {
        "model_type": "gpt_oss",
        "hidden_size": 64,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"],
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "rope_theta": 150000,
        "max_position_embeddings": 4096,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    mx.random.seed(seed)
    model = gpt_oss.Model(gpt_oss.ModelArgs.from_dict(config))
    mx.eval(model.parameters())
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out


class Script:
    """A logits processor that makes the model write `ids`, one a step, then `after` for ever.

    `after` (default: the first id) shows what happens past the script: a stop token that did
    not stop generation lets it through."""

    def __init__(self, ids: Sequence[int], after: int | None = None) -> None:
        self.ids = list(ids)
        self.after = self.ids[0] if after is None else after
        self.step = 0

    def __call__(self, tokens: Any, logits: Any) -> Any:
        import mlx.core as mx

        token = self.ids[self.step] if self.step < len(self.ids) else self.after
        self.step += 1
        mask = mx.arange(logits.shape[-1]) == token
        return mx.where(mask, mx.zeros_like(logits), mx.full(logits.shape, -1e9, logits.dtype))


@contextmanager
def scripted(runtime: Any, *scripts: Sequence[int]) -> Iterator[list[Script]]:
    """The runtime's next generations write `scripts`, in order (the engine's own processors,
    a grammar's included, still run after it: a script must be what they allow)."""
    queue = [Script(ids) for ids in scripts]
    used: list[Script] = []
    original = runtime._enqueue

    def enqueue(tokens: Any, sampling: Any, processors: list[Any], *args: Any, **kw: Any) -> Any:
        script = queue.pop(0) if queue else None
        if script is not None:
            used.append(script)
            processors = [script, *processors]
        return original(tokens, sampling, processors, *args, **kw)

    runtime._enqueue = enqueue
    try:
        yield used
    finally:
        runtime._enqueue = original
