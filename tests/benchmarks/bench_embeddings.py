"""64 inputs in one /v1/embeddings request against the same 64 sent one at a time.

A stack (core and façade, in process) serves the bundled tiny embedding model, `--model`, or
with `--bge-small-shape` random weights of bge-small's shape (BERT, 12 layers, 384 wide, 12
heads) on the tiny model's tokenizer: the timing of a real model's size, not its vectors.
Times, end to end through the OpenAI SDK, one request of 64 inputs and 64 requests of one
(sent one after another), medians of `--repeats`; then the engine alone: one forward of the 64
rows against 64 forwards of one. Prints the figures and the ratios. Not a test.

    flock /tmp/bench.lock .venv/bin/python tests/benchmarks/bench_embeddings.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.engine.blas import preload_blas

BLAS = preload_blas()  # before mlx is imported, as the console script does

from mlx_responses.service.config import BUNDLED_MODEL  # noqa: E402
from mlx_responses.service.engine.embedding.forward import forward  # noqa: E402
from mlx_responses.service.engine.embedding.load import load_embedding_model  # noqa: E402
from openai import OpenAI  # noqa: E402

from tests.support.stack import Stack  # noqa: E402
from training.tiny_embed.corpus import held_out  # noqa: E402

INPUTS = 64
BGE_SMALL = {"hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 1536, "max_position_embeddings": 512}  # fmt: skip


def bge_small_shaped(tiny: Path, out: Path) -> Path:
    """A random BERT of bge-small's shape, with `tiny`'s tokenizer, in `out`."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_embeddings.models import bert

    out.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny / name, out / name)
    config = {**json.loads((tiny / "config.json").read_text()), **BGE_SMALL}
    config.pop("matryoshka_dimensions", None)
    (out / "config.json").write_text(json.dumps(config))
    model = bert.Model(bert.ModelArgs.from_dict(config))
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return out


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
    parser.add_argument("--bge-small-shape", action="store_true")
    args = parser.parse_args()
    if args.bge_small_shape:
        folder = Path(tempfile.mkdtemp()) / "bge-small-shaped"
        args.model = bge_small_shaped(args.model, folder)
    pairs = held_out(count=INPUTS // 8 + 1)
    texts = [p.passage for p in pairs][:INPUTS]
    print(f"model {args.model.name}, {INPUTS} inputs, BLAS {BLAS}, load {os.getloadavg()[0]:.2f}")

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
