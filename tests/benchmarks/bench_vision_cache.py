"""Image-request TTFT, cold vs. cached image encoding, on a random-weight Qwen2-VL.

Builds a VLM with a wider vision tower than the tests' (so the tower's cost shows), serves it
on the real stack, and streams the same image request: the first pays the vision tower, the
next ones hit the image-encoding cache. Prints one line. Not a test.

    .venv/bin/python tests/benchmarks/bench_vision_cache.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mlx_responses.service.engine.blas import preload_blas

preload_blas()

import httpx  # noqa: E402
from PIL import Image  # noqa: E402

from tests.support.random_vlm import build_random_vlm  # noqa: E402
from tests.support.stack import Stack  # noqa: E402


def _image(seed: int, side: int) -> str:
    pixels = bytes((i * 7919 + seed * 104729) % 251 for i in range(side * side * 3))
    buffer = io.BytesIO()
    Image.frombytes("RGB", (side, side), pixels).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _ttft(stack: Stack, url: str) -> float:
    body = {
        "model": stack.settings.models[0].name,
        "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}],
        "max_output_tokens": 2,
        "temperature": 0,
        "stream": True,
    }
    started = time.perf_counter()
    with httpx.stream("POST", f"{stack.base_url}/v1/responses", json=body, timeout=300) as reply:
        for line in reply.iter_lines():
            if "response.output_text.delta" in line:
                return time.perf_counter() - started
    raise RuntimeError("no text delta")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--side", type=int, default=448, help="image side, pixels")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        side_pixels = args.side * args.side
        folder = build_random_vlm(
            Path(tmp) / "bench-vlm", vision_width=256, vision_depth=8, max_pixels=side_pixels
        )
        with Stack.running(model_path=folder, store_url="memory") as stack:
            _ttft(stack, _image(999, 56))  # warm-up: compile, first-call costs
            cold = [_ttft(stack, _image(seed, args.side)) for seed in range(args.repeats)]
            url = _image(0, args.side)
            cached = [_ttft(stack, url) for _ in range(args.repeats)]
    tokens = side_pixels // (28 * 28)
    print(
        f"image TTFT ({args.side}x{args.side} px, {tokens} image tokens, vision tower 8x256): "
        f"cold {statistics.median(cold) * 1000:.0f} ms, cached encoding "
        f"{statistics.median(cached) * 1000:.0f} ms (median of {args.repeats})"
    )


if __name__ == "__main__":
    main()
