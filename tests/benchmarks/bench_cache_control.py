"""A second Messages request sharing a marked prefix, on the bundled sliding-window model.

The bundled model attends over a 2,048-token window: past it, a prompt-cache entry serves only
the prompt it was taken at. Two runs on one server (an in-process stack), each two requests of
about 15,000 tokens (a long system prompt and a long first block of the user's message, then a
short question that differs): unmarked, the second request is served from the system turn's end
only; with `cache_control` on both blocks, from the end of the marked block. Prints each
request's time and usage. Not a test.

    .venv/bin/python tests/benchmarks/bench_cache_control.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anthropic
from mlx_responses.service.config import BUNDLED_MODEL

from tests.support.stack import Stack

PROSE = (
    "When you edit a file, read it first, keep its style, and run the tests that cover the "
    "change; report what you changed and why, and never leave the tree in a broken state. "
)
MARK = {"type": "ephemeral"}


def body(tag: str, question: str, *, marked: bool) -> dict[str, Any]:
    mark = {"cache_control": MARK} if marked else {}
    logbook = {"type": "text", "text": "Logbook. " + PROSE * 120, **mark}
    return {
        "max_tokens": 1,
        "system": [{"type": "text", "text": tag + PROSE * 80, **mark}],
        "messages": [{"role": "user", "content": [logbook, {"type": "text", "text": question}]}],
    }


def main() -> None:
    with Stack.running(model_path=BUNDLED_MODEL, store_url="memory") as stack:
        client = anthropic.Anthropic(
            base_url=stack.base_url, api_key="x", max_retries=0, timeout=600
        )
        model = stack.settings.models[0].name
        for marked, tag in ((False, "Run A. "), (True, "Run B. ")):
            for question in (" Where did we go?", " Who was on board?"):
                start = time.perf_counter()
                reply = client.messages.create(model=model, **body(tag, question, marked=marked))
                usage = reply.usage
                print(
                    f"marked={marked} {question!r}: {(time.perf_counter() - start) * 1e3:.0f} ms, "
                    f"read {usage.cache_read_input_tokens}, "
                    f"written {usage.cache_creation_input_tokens}, input {usage.input_tokens}"
                )


if __name__ == "__main__":
    main()
