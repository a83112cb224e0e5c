"""64 inputs in one /v1/embeddings request against the same 64 sent one at a time.

A stack (core and façade, in process) serves the bundled tiny embedding model, or `--model`.
Times, end to end through the OpenAI SDK, one request of 64 inputs and 64 requests of one
(sent one after another), medians of `--repeats`; then the engine alone: one forward of the 64
rows against 64 forwards of one. Prints the figures and the ratios. Not a test.

    flock /tmp/bench.lock .venv/bin/python tests/benchmarks/bench_embeddings.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.config import BUNDLED_MODEL
from mlx_responses.service.engine.embedding.forward import forward
from mlx_responses.service.engine.embedding.load import load_embedding_model
from openai import OpenAI

from tests.support.stack import Stack
from training.tiny_embed.corpus import held_out

INPUTS = 64


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=BUNDLED_MODEL.parent / "tiny-embed")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    pairs = held_out(count=INPUTS // 8 + 1)
    texts = [p.passage for p in pairs][:INPUTS]
    print(f"model {args.model.name}, {INPUTS} inputs, load {os.getloadavg()[0]:.2f}")

    with Stack.running(model_path=args.model, models=(args.model,)) as stack:
        client = OpenAI(base_url=f"{stack.base_url}/v1", api_key="sk-none")
        name = args.model.name
        client.embeddings.create(model=name, input=texts)  # loaded and warm

        def batched() -> None:
            client.embeddings.create(model=name, input=texts, encoding_format="float")

        def one_by_one() -> None:
            for text in texts:
                client.embeddings.create(model=name, input=[text], encoding_format="float")

        together = median_seconds(batched, args.repeats)
        apart = median_seconds(one_by_one, args.repeats)
    print(
        f"served: 64 at once {together * 1e3:8.1f} ms, 64x one {apart * 1e3:8.1f} ms: "
        f"{apart / together:5.1f}x (at once / one = {together / apart:.3f})"
    )

    loaded, shape = load_embedding_model(args.model, args.model.name)
    tokenizer = loaded.tokenizer._tokenizer
    rows = [list(tokenizer(t)["input_ids"]) for t in texts]
    forward(loaded.model, rows, shape.pad_id)  # warm
    one_forward = median_seconds(lambda: forward(loaded.model, rows, shape.pad_id), args.repeats)
    many = median_seconds(
        lambda: [forward(loaded.model, [r], shape.pad_id) for r in rows], args.repeats
    )
    print(
        f"engine: 1 forward of 64 {one_forward * 1e3:8.1f} ms, 64 forwards of 1 "
        f"{many * 1e3:8.1f} ms: {many / one_forward:5.1f}x"
    )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
