"""The target's own generations, which its drafters learn from: tiny-chat's training prompts
continued by the target, greedy and sampled, saved so every head trains on the same data."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Sequence = tuple[list[int], int]  # prompt + continuation ids, prompt length


def load_target(path: Path) -> tuple[Any, Any]:
    """The target (mlx-lm) and its tokenizer as its folder declares it: tiny-chat's
    tokenizer.json, not the one transformers rebuilds for a Qwen3.5 (`declared_tokenizer.py`)."""
    from mlx_lm import load
    from mlx_responses.service.engine.declared_tokenizer import as_declared

    model, wrapper = load(str(path))[:2]
    return model, as_declared(path, wrapper._tokenizer)


def corpus_prompts(tokenizer: Any, n: int, seed: int) -> list[list[int]]:
    """Prompts of tiny-chat's training mix (its last trained turn's), through the chat template."""
    from training.tiny_chat.data import FULL_MIX, train_conversations

    out = []
    for conv in train_conversations(n, seed=seed, mix=FULL_MIX):
        turn = conv.turns[-1]
        text = tokenizer.apply_chat_template(
            conv.messages[: turn.index],
            tools=conv.tools,
            add_generation_prompt=True,
            tokenize=False,
            enable_thinking=turn.enable_thinking,
        )
        out.append(list(tokenizer.encode(text, add_special_tokens=False)))
    return out


def generate(
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    *,
    max_tokens: int,
    temperature: float,
    seed: int,
) -> list[Sequence]:
    """The target's continuations (ending with <|im_end|> when it stopped), via mlx-lm."""
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    from training.tiny_chat.tokenizer import IM_END

    mx.random.seed(seed)
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    gen = BatchGenerator(
        model,
        stop_tokens=[[eos]],
        sampler=make_sampler(temp=temperature),
        completion_batch_size=64,
        prefill_batch_size=64,
    )
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    try:
        uids = gen.insert([prompts[i] for i in order], [max_tokens] * len(prompts))
        tokens: dict[int, list[int]] = {uid: [] for uid in uids}
        while responses := gen.next_generated():
            for r in responses:
                tokens[r.uid].append(r.token)
    finally:
        gen.close()
    out: list[Sequence | None] = [None] * len(prompts)
    for i, uid in zip(order, uids, strict=True):
        out[i] = (prompts[i] + tokens[uid], len(prompts[i]))
    return [s for s in out if s is not None]


def padded(batch: list[Sequence]) -> tuple[Any, Any]:
    """Right-padded ids and a mask of the continuation's positions."""
    import mlx.core as mx
    import numpy as np

    t = max(len(ids) for ids, _ in batch)
    toks = np.zeros((len(batch), t), dtype=np.int32)
    mask = np.zeros((len(batch), t), dtype=np.float32)
    for r, (ids, start) in enumerate(batch):
        toks[r, : len(ids)] = ids
        mask[r, start : len(ids)] = 1.0
    return mx.array(toks), mx.array(mask)


def picks(mask: Any, shift: int) -> Any:
    """Flat indices (into [B * (T - 1)]) of head outputs whose target, `shift` tokens ahead of
    their input token, is a continuation token."""
    import mlx.core as mx
    import numpy as np

    m = np.array(mask)
    t = m.shape[1]
    rows, cols = np.nonzero(m[:, shift + 1 :])
    return mx.array((rows * (t - 1) + cols).astype(np.int32))


def own_generations(
    target: Any, tokenizer: Any, path: Path, *, prompts: int, max_tokens: int, seed: int
) -> list[Sequence]:
    """The continuations stored at `path`, or new ones (greedy, then at temperature 0.7)."""
    if path.exists():
        return [(ids, start) for ids, start in json.loads(path.read_text())]
    ids = corpus_prompts(tokenizer, prompts, seed + 11)
    data = generate(target, tokenizer, ids, max_tokens=max_tokens, temperature=0.0, seed=seed)
    log.info("%d greedy continuations", len(data))
    data += generate(target, tokenizer, ids, max_tokens=max_tokens, temperature=0.7, seed=seed + 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data
