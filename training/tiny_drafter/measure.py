"""Acceptance of the tiny Qwen3.5's MTP head as mlx-vlm measures it: mlx-vlm loads the checkpoint
and its `mtp.*` head (what `mlx_vlm.server --draft-model <same folder> --draft-kind mtp` does) and
runs its own speculative decoding over held-out tiny-chat prompts.

    python -m training.tiny_drafter.measure --target service/assets/tiny-qwen35-mtp

Prints, per temperature, the drafts proposed and accepted, the acceptance rate and the mean number
of tokens each round emits (accepted drafts + the target's own token).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Acceptance:
    rounds: int
    drafted: int
    accepted: int
    tokens: int

    @property
    def rate(self) -> float:
        return self.accepted / max(self.drafted, 1)

    @property
    def tokens_per_round(self) -> float:
        return (self.accepted + self.rounds) / max(self.rounds, 1)


def held_out_prompts(tokenizer: Any, per_behaviour: int) -> list[list[int]]:
    """tiny-chat's held-out prompts (echo, tool, think), through the checkpoint's template."""
    from training.tiny_chat.data import eval_prompts
    from training.tiny_chat.evaluate import prompt_tokens

    return [
        prompt_tokens(tokenizer, p)
        for behaviour in ("echo", "tool", "think")
        for p in eval_prompts(behaviour, per_behaviour)
    ]


def load(target: Path, drafter: Path | None = None, kind: str = "mtp") -> tuple[Any, Any, Any]:
    """mlx-vlm's model, tokenizer and drafter (by default the checkpoint's own MTP head), as
    `mlx_vlm.server --draft-model` loads them."""
    from mlx_responses.service.engine.declared_tokenizer import as_declared
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.utils import load as vlm_load

    model, processor = vlm_load(str(target))
    loaded, resolved = load_drafter(str(drafter or target), kind=kind)
    if resolved != kind:
        raise RuntimeError(f"mlx-vlm resolved the drafter as {resolved!r}")
    # The folder's own tokenizer.json (transformers rebuilds a Qwen3.5's otherwise), as we serve
    # it; mlx_vlm.server encodes with the rebuilt one.
    return model, as_declared(target, getattr(processor, "tokenizer", processor)), loaded


def acceptance(
    model: Any,
    drafter: Any,
    prompts: list[list[int]],
    eos: int,
    *,
    temperature: float,
    max_tokens: int,
    block_size: int | None = None,
    kind: str = "mtp",
    seed: int = 0,
) -> Acceptance:
    """Drafted and accepted counts over `prompts`, each decoded until `eos` or `max_tokens`."""
    import mlx.core as mx
    from mlx_vlm.generate.ar import generate_step

    rounds = drafted = accepted = tokens = 0
    for i, ids in enumerate(prompts):
        mx.random.seed(seed + i)
        steps = generate_step(
            mx.array([ids]),
            model,
            None,
            None,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=1.0,
            top_k=0,
            draft_model=drafter,
            draft_kind=kind,
            draft_block_size=block_size,
        )
        for token, _ in steps:
            tokens += 1
            if int(token) == eos:
                break
        steps.close()
        rounds += len(drafter.accept_lens)
        accepted += int(sum(drafter.accept_lens))
        drafted += int(sum(drafter.draft_lens))
    return Acceptance(rounds, drafted, accepted, tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=Path, default=Path("service/assets/tiny-qwen35-mtp"))
    parser.add_argument("--prompts", type=int, default=20, help="held-out prompts per behaviour")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--eagle3", type=Path, help="measure this EAGLE-3 folder instead")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from mlx_responses.service.engine.blas import preload_blas

    preload_blas()
    from training.tiny_chat.tokenizer import IM_END

    kind = "eagle3" if args.eagle3 else "mtp"
    model, tokenizer, drafter = load(args.target, args.eagle3, kind)
    prompts = held_out_prompts(tokenizer, args.prompts)
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    for temperature in (0.0, 0.7):
        a = acceptance(
            model,
            drafter,
            prompts,
            eos,
            temperature=temperature,
            max_tokens=args.max_tokens,
            block_size=args.block_size,
            kind=kind,
        )
        print(
            f"{kind} temperature {temperature}: {len(prompts)} prompts, {a.tokens} tokens, "
            f"{a.rounds} rounds, {a.accepted}/{a.drafted} drafts accepted ({a.rate:.1%}), "
            f"{a.tokens_per_round:.2f} tokens per round",
            flush=True,
        )


if __name__ == "__main__":
    main()
