"""Speculation as served: the engine worker (`--engine auto`, the solo path in front, the
defaults of `mlx-responses serve`) decoding the bundled tiny-chat without drafts, with n-gram
drafts and with a draft model, greedy and at temperature 0.7, 1 and 8 streams, on a prompt it
repeats and on one it does not. Called by `bench_speculative.py --served`.

The model is tiny-chat with its sliding window off (the draft model needs plain caches; the
window is 2,048 tokens, so it never slides here); the draft is that model cut to its first
layer (same embeddings and head). Sampled streams are unseeded, as agents send them (the
contenders decode different text of the same prompt); with `--seeded` each samples from its
own seed (seed + its index), and with n-gram drafts a seeded stream's tokens are the very
tokens it samples without them (the seeded path draws each position with its own key:
dearer). Decode tok/s counts every token after a stream's first, over the time from the first
stream's first token to the last stream's last; CPU ms per token (process time) beside it.
Contenders run one after another, rotated per repeat; medians.

`--deeper N`: a draft model as a deployment pairs one, far cheaper than its target: the target
is tiny-chat deepened to N layers (`deepened`: its own 3 layers, then copies of them whose
output projections are scaled by `--perturb`, so the target computes nearly tiny-chat's
function at N/3 of its layers' cost) and tiny-chat itself, whole, drafts for it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TINY_CHAT = REPO / "service" / "assets" / "tiny-chat"
# What tiny-chat repeats: asked to reply with a word 30 times it loops on it (greedy and at 0.7;
# n-gram drafts keep ~65% of its sampled tokens). What it does not: three words 8 times, which
# at 0.7 it scrambles (drafts keep few).
PROMPTS = {
    "repeats": "Reply with: " + " ".join(["river"] * 30),
    "varies": "Reply with: " + " ".join(["apple", "river", "stone"] * 8),
}
CONTENDERS = ("off", "ngram", "draft")


def windowless(folder: Path, out: Path) -> Path:
    """A copy of `folder` with its sliding window off (same weights)."""
    shutil.copytree(folder, out)
    config = json.loads((out / "config.json").read_text())
    config["use_sliding_window"] = False
    (out / "config.json").write_text(json.dumps(config))
    return out


def deepened(folder: Path, out: Path, layers: int, perturb: float) -> Path:
    """A copy of `folder` (a qwen3) with `layers` layers: its own, then copies of them in turn,
    each copy's attention and MLP output projections scaled by `perturb` (0: the copies add
    nothing, and the deeper model computes the very function of the shallow one)."""
    import mlx.core as mx

    shutil.copytree(folder, out)
    config = json.loads((out / "config.json").read_text())
    own = config["num_hidden_layers"]
    weights: dict[str, Any] = dict(mx.load(str(out / "model.safetensors")))
    for layer in range(own, layers):
        source = f"model.layers.{layer % own}."
        for name in [k for k in weights if k.startswith(source)]:
            value = weights[name]
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                value = value * perturb
            weights[f"model.layers.{layer}." + name.removeprefix(source)] = value
    mx.save_safetensors(str(out / "model.safetensors"), weights)
    config["num_hidden_layers"] = layers
    (out / "config.json").write_text(json.dumps(config))
    return out


def _worker(path: Path, mode: str, k: int, draft: Path | None = None) -> Any:
    from mlx_responses.service.engine.model import load_model
    from mlx_responses.service.engine.worker import EngineWorker

    def first_layer() -> Any:
        if draft is not None:
            return load_model(draft)
        loaded = load_model(path)
        loaded.model.model.layers = loaded.model.model.layers[:1]
        return loaded

    return EngineWorker(
        lambda: load_model(path),
        engine="auto",
        speculative=mode,
        num_draft_tokens=k,
        load_draft=first_layer if mode == "draft" else None,
        prompt_cache_max_entries=0,
    )


async def _timed(stream: Any, marks: list[tuple[float, int]]) -> None:
    """Appends (time, tokens) of each chunk of `stream`."""
    async for chunks in stream.batches():
        now = time.perf_counter()
        for chunk in chunks:
            assert chunk.finish_reason in (None, "stop", "length"), chunk.error
            marks.append((now, chunk.tokens))


async def _decode(
    worker: Any,
    prompt: list[int],
    streams: int,
    temperature: float,
    *,
    seed: int | None,
    tokens: int,
) -> tuple[float, float, int]:
    """Aggregate decode tok/s, CPU ms per token, tokens (`seed`: stream i's is seed + i)."""
    from mlx_responses.service.engine.requests import SamplingParams

    marks: list[list[tuple[float, int]]] = [[] for _ in range(streams)]
    cpu = time.process_time()
    submitted = [
        worker.submit(
            prompt,
            SamplingParams(
                max_tokens=tokens, temperature=temperature, seed=None if seed is None else seed + i
            ),
        )
        for i in range(streams)
    ]
    await asyncio.gather(*(_timed(s, m) for s, m in zip(submitted, marks, strict=True)))
    cpu = time.process_time() - cpu
    start = min(m[0][0] for m in marks)
    end = max(m[-1][0] for m in marks)
    count = sum(sum(n for _, n in m) - m[0][1] for m in marks)
    return count / max(end - start, 1e-9), cpu / max(count, 1) * 1e3, count


async def _cell(
    workers: dict[str, Any], prompt: list[int], streams: int, temperature: float, *, args: Any
) -> tuple[dict[str, float], dict[str, float], dict[str, str], dict[str, list[float]]]:
    """One cell's medians (tok/s, CPU ms per token), drafts kept/proposed, and all rates."""
    seeded = args.seeded and temperature > 0
    for worker in workers.values():  # warm: each contender once
        await _decode(worker, prompt, streams, temperature, seed=None, tokens=8)
    rates: dict[str, list[float]] = {m: [] for m in CONTENDERS}
    costs: dict[str, list[float]] = {m: [] for m in CONTENDERS}
    kept: dict[str, list[int]] = {m: [0, 0] for m in CONTENDERS}
    for r in range(args.repeats):
        for mode in CONTENDERS[r % 3 :] + CONTENDERS[: r % 3]:  # rotated: none always first
            stats = workers[mode].stats
            before = (stats.accepted_tokens, stats.draft_tokens)
            rate, ms, _ = await _decode(
                workers[mode],
                prompt,
                streams,
                temperature,
                seed=args.seed + 100 * r if seeded else None,
                tokens=args.tokens,
            )
            rates[mode].append(rate)
            costs[mode].append(ms)
            kept[mode][0] += stats.accepted_tokens - before[0]
            kept[mode][1] += stats.draft_tokens - before[1]
    med = {m: statistics.median(v) for m, v in rates.items()}
    cpu = {m: statistics.median(v) for m, v in costs.items()}
    return med, cpu, {m: f"{a}/{d}" for m, (a, d) in kept.items()}, rates


async def run(args: Any) -> list[str]:
    """Prints each cell's contenders with their ratios to "off"; the `bench:` items.
    `args`: tokens, num_draft_tokens, repeats, seed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = windowless(TINY_CHAT, Path(tmp) / "tiny-chat")
        draft = None
        if args.deeper:
            draft, path = path, deepened(path, Path(tmp) / "deeper", args.deeper, args.perturb)
        workers = {mode: _worker(path, mode, args.num_draft_tokens, draft) for mode in CONTENDERS}
        loaded = None
        for worker in workers.values():
            loaded = await worker.start()
        assert loaded is not None
        summary: list[str] = []
        try:
            for streams in args.streams:
                for temperature in args.temperatures:
                    for name, text in PROMPTS.items():
                        if name not in args.prompts:
                            continue
                        prompt = loaded.tokenizer.apply_chat_template(
                            [{"role": "user", "content": text}], add_generation_prompt=True
                        )
                        med, cpu, kept, rates = await _cell(
                            workers, prompt, streams, temperature, args=args
                        )
                        ratios = {m: med[m] / med["off"] for m in CONTENDERS}
                        print(
                            f"@{streams} T={temperature} {name}: "
                            + "  ".join(
                                f"{m}={med[m]:.0f} tok/s {ratios[m]:.2f}x "
                                f"({cpu[m]:.2f} cpu ms/tok, kept {kept[m]})"
                                for m in CONTENDERS
                            )
                            + "  ranges: "
                            + " ".join(f"{m}={min(v):.0f}-{max(v):.0f}" for m, v in rates.items()),
                            flush=True,
                        )
                        tag = f"{streams}_t{temperature:g}_{name}"
                        summary += [f"{m}_vs_off_{tag}={ratios[m]:.2f}" for m in CONTENDERS[1:]]
        finally:
            for worker in workers.values():
                worker.stop()
        return summary
