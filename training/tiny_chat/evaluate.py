"""Scores the tiny chat model's three behaviours (echo, tool, think) on held-out prompts."""

from __future__ import annotations

import argparse
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.tiny_chat.data import EvalPrompt, eval_prompts, unknown_word_prompts
from training.tiny_chat.tokenizer import IM_END

log = logging.getLogger(__name__)

# copy: `Reply with: W` for words outside the lexicon (English words and random strings).
BEHAVIOURS: tuple[str, ...] = ("echo", "tool", "think", "copy")


def behaviour_prompts(behaviour: str, n: int) -> list[EvalPrompt]:
    """The held-out prompts of one behaviour (``n`` of each, the copy set is fixed)."""
    if behaviour == "copy":
        return unknown_word_prompts()
    return eval_prompts(behaviour, n)


@dataclass(frozen=True)
class Outcome:
    """One scored prompt: what came out, and whether it matched exactly and stopped on eos."""

    prompt: EvalPrompt
    output: str
    stopped: bool

    @property
    def ok(self) -> bool:
        return self.stopped and self.output == self.prompt.expected


def prompt_tokens(tokenizer: Any, prompt: EvalPrompt) -> list[int]:
    """Render a prompt through the tokenizer's own chat template and tokenize it."""
    text = tokenizer.apply_chat_template(
        prompt.messages,
        tools=prompt.tools,
        add_generation_prompt=True,
        tokenize=False,
        enable_thinking=prompt.enable_thinking,
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


def generate_greedy(
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    max_tokens: list[int],
    batch_size: int = 64,
) -> list[tuple[list[int], bool]]:
    """Greedy continuations (tokens, stopped-on-<|im_end|>) via mlx_lm's BatchGenerator."""
    from mlx_lm.generate import BatchGenerator

    eos = tokenizer.convert_tokens_to_ids(IM_END)
    gen = BatchGenerator(
        model,
        stop_tokens=[[eos]],
        completion_batch_size=batch_size,
        prefill_batch_size=batch_size,
    )
    try:
        uids = gen.insert(prompts, max_tokens)
        tokens: dict[int, list[int]] = {uid: [] for uid in uids}
        stopped: dict[int, bool] = dict.fromkeys(uids, False)
        while responses := gen.next_generated():
            for r in responses:
                if r.finish_reason == "stop":
                    stopped[r.uid] = True
                else:
                    tokens[r.uid].append(r.token)
    finally:
        gen.close()
    return [(tokens[uid], stopped[uid]) for uid in uids]


def run_prompts(
    model: Any, tokenizer: Any, prompts: list[EvalPrompt], batch_size: int = 64
) -> list[Outcome]:
    """Generate for every prompt (sorted by length for tight batches) and compare."""
    encoded = [prompt_tokens(tokenizer, p) for p in prompts]
    budget = [len(tokenizer.encode(p.expected, add_special_tokens=False)) + 4 for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
    results = generate_greedy(
        model,
        tokenizer,
        [encoded[i] for i in order],
        [budget[i] for i in order],
        batch_size=batch_size,
    )
    outcomes: list[Outcome | None] = [None] * len(prompts)
    for i, (toks, stopped) in zip(order, results, strict=True):
        outcomes[i] = Outcome(prompts[i], tokenizer.decode(toks), stopped)
    return [o for o in outcomes if o is not None]


def evaluate(
    model: Any, tokenizer: Any, n: int = 200, batch_size: int = 64
) -> dict[str, list[Outcome]]:
    """Outcomes for the held-out prompts of each behaviour (``n`` each, fixed for copy)."""
    prompts = [p for b in BEHAVIOURS for p in behaviour_prompts(b, n)]
    outcomes = run_prompts(model, tokenizer, prompts, batch_size=batch_size)
    by_behaviour: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_behaviour[o.prompt.behaviour].append(o)
    return dict(by_behaviour)


def accuracy(outcomes: list[Outcome]) -> float:
    """Fraction of exact, eos-terminated matches."""
    return sum(o.ok for o in outcomes) / max(1, len(outcomes))


def summarize(results: dict[str, list[Outcome]]) -> dict[str, float]:
    """Per-behaviour and per-variant accuracies."""
    scores: dict[str, float] = {}
    for behaviour, outcomes in results.items():
        scores[behaviour] = accuracy(outcomes)
        variants: dict[str, list[Outcome]] = defaultdict(list)
        for o in outcomes:
            variants[o.prompt.variant].append(o)
        if len(variants) > 1:
            for variant, vs in variants.items():
                scores[f"{behaviour}/{variant}"] = accuracy(vs)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", type=Path, nargs="?", default=Path("service/assets/tiny-chat"))
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--show-failures", type=int, default=5)
    args = parser.parse_args()
    from mlx_lm import load

    model, tokenizer = load(str(args.model))
    start = time.perf_counter()
    results = evaluate(model, tokenizer, n=args.n)
    for name, value in summarize(results).items():
        print(f"{name:28s} {value:.3f}")
    print(f"eval time {time.perf_counter() - start:.1f}s")
    for outcomes in results.values():
        bad = [o for o in outcomes if not o.ok][: args.show_failures]
        for o in bad:
            print(f"--- [{o.prompt.variant}] expected {o.prompt.expected!r}")
            print(f"    got {o.output!r} (stopped={o.stopped})")
            print(f"    last user: {o.prompt.messages[-1].get('content')!r}")


if __name__ == "__main__":
    main()
