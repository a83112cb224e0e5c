"""Scores the tiny chat model behind a long agent preamble (Codex's own instructions).

The held-out prompts of `evaluate.py` are asked again after a preamble of about N tokens: Codex
0.169's developer messages and environment context (tests/fixtures/codex_0.169_request.json),
repeated until long enough, then cut to N tokens. The preamble is prefilled once and its KV cache
shared by every prompt, so an 18k-token preamble costs one prefill, not one per prompt. A model
whose config declares a sliding window is scored with it, as the server runs it.

    python -m training.tiny_chat.long_context MODEL --lengths 0,2048,18432 -n 50
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from training.tiny_chat.data import EvalPrompt
from training.tiny_chat.evaluate import (
    BEHAVIOURS,
    Outcome,
    accuracy,
    behaviour_prompts,
    prompt_tokens,
)
from training.tiny_chat.tokenizer import IM_END

FIXTURE = Path(__file__).resolve().parents[2] / "tests/fixtures/codex_0.169_request.json"
PREFILL_CHUNK = 1024


def agent_text() -> str:
    """Codex's developer messages and the environment context, as one text."""
    body = json.loads(FIXTURE.read_text())["body"]
    parts = [
        c["text"]
        for item in body["input"][:-1]  # the last item is the user's request
        for c in item["content"]
        if c.get("type") == "input_text"
    ]
    return "\n\n".join(parts)


def synthetic_text() -> str:
    """Training-style long instructions (lexicon words, spelled words, paths, markup)."""
    from training.tiny_chat.data import Generator

    return Generator(99, "eval").long_text(3000, 3000)


def preamble(tokenizer: Any, n_tokens: int, source: str = "codex") -> str:
    """About ``n_tokens`` of agent preamble (Codex's text, or the training's synthetic
    instructions with ``source="synthetic"``), repeated as needed, then cut."""
    text = agent_text() if source == "codex" else synthetic_text()
    ids: list[int] = []
    while len(ids) < n_tokens:
        ids += tokenizer.encode(text + "\n\n", add_special_tokens=False)
    return str(tokenizer.decode(ids[:n_tokens]))


def with_preamble(prompt: EvalPrompt, text: str) -> list[dict[str, Any]]:
    """The prompt's messages after a developer message holding the preamble."""
    if not text:
        return list(prompt.messages)
    return [{"role": "system", "content": text}, *prompt.messages]


def _tokens(tokenizer: Any, prompt: EvalPrompt, text: str) -> list[int]:
    return prompt_tokens(tokenizer, replace(prompt, messages=with_preamble(prompt, text)))


def _prefill(model: Any, cache: list[Any], tokens: list[int]) -> Any:
    import mlx.core as mx

    logits = None
    for start in range(0, len(tokens), PREFILL_CHUNK):
        logits = model(mx.array(tokens[start : start + PREFILL_CHUNK])[None], cache=cache)
        mx.eval([c.state for c in cache])
    return logits


def _fork(cache: list[Any]) -> list[Any]:
    """A copy of the shared cache (plain or rotating) that the prompt extends; the shared one
    stays intact."""
    import mlx.core as mx

    out = []
    for c in cache:
        own = copy.copy(c)  # offset and, for a rotating cache, where it wraps
        if c.keys is not None:
            own.keys, own.values = mx.array(c.keys), mx.array(c.values)
        out.append(own)
    return out


def score(
    model: Any, tokenizer: Any, prompts: list[EvalPrompt], n_tokens: int, source: str = "codex"
) -> tuple[list[Outcome], int, float]:
    """Greedy outcomes behind ~``n_tokens`` of preamble; the longest prompt, prefill seconds."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    text = preamble(tokenizer, n_tokens, source) if n_tokens else ""
    encoded = [_tokens(tokenizer, p, text) for p in prompts]
    shared = min(len(e) for e in encoded)
    for e in encoded[1:]:
        shared = next((i for i in range(shared) if e[i] != encoded[0][i]), shared)
    shared = max(0, shared - 1)
    cache = make_prompt_cache(model)
    start = time.perf_counter()
    if shared:
        _prefill(model, cache, encoded[0][:shared])
    prefill_s = time.perf_counter() - start
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    outcomes = []
    for prompt, tokens in zip(prompts, encoded, strict=True):
        own = _fork(cache)
        logits = _prefill(model, own, tokens[shared:])
        budget = len(tokenizer.encode(prompt.expected, add_special_tokens=False)) + 4
        out: list[int] = []
        stopped = False
        for _ in range(budget):
            token = int(mx.argmax(logits[0, -1]).item())
            if token == eos:
                stopped = True
                break
            out.append(token)
            logits = model(mx.array([[token]]), cache=own)
        outcomes.append(Outcome(prompt, tokenizer.decode(out), stopped))
    return outcomes, max(len(e) for e in encoded), prefill_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", type=Path, nargs="?", default=Path("service/assets/tiny-chat"))
    parser.add_argument("--lengths", default="0,2048,18432")
    parser.add_argument("-n", type=int, default=50)
    parser.add_argument("--source", choices=("codex", "synthetic"), default="codex")
    parser.add_argument("--show-failures", type=int, default=3)
    args = parser.parse_args()
    from mlx_lm import load
    from mlx_responses.service.engine.sliding_window import apply_window

    model, tokenizer = load(str(args.model))
    # The window the server applies, if the config declares one (service/engine/sliding_window.py)
    config = json.loads((args.model / "config.json").read_text())
    window = apply_window(model, config, args.model.name)
    print(f"{args.model}: context {config.get('max_position_embeddings')}, window {window}")
    prompts = [
        p for b in (*BEHAVIOURS, "patch", "patch_given") for p in behaviour_prompts(b, args.n)
    ]
    for n_tokens in (int(x) for x in args.lengths.split(",")):
        start = time.perf_counter()
        outcomes, longest, prefill_s = score(model, tokenizer, prompts, n_tokens, args.source)
        by: dict[str, list[Outcome]] = defaultdict(list)
        for o in outcomes:
            by[o.prompt.behaviour].append(o)
        figures = "  ".join(f"{b} {accuracy(os):.3f}" for b, os in by.items())
        elapsed = time.perf_counter() - start
        print(
            f"preamble {n_tokens:6d}: {figures}  all {accuracy(outcomes):.3f}"
            f"  (longest prompt {longest}, prefill {prefill_s:.1f}s, {elapsed:.0f}s)",
            flush=True,
        )
        for o in [o for o in outcomes if not o.ok][: args.show_failures]:
            print(f"    [{o.prompt.variant}] expected {o.prompt.expected!r} got {o.output!r}")


if __name__ == "__main__":
    main()
