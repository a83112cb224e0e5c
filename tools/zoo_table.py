"""Writes the architecture table of docs/concepts/architecture.md from the zoo (a region between
two markers): every text architecture mlx-lm ships, the scheduler `--engine auto` gives it on a
CPU and on a GPU, and what it gets (batched, the prompt cache's reuse, the disk tier, ngram
drafts), or why the engine refuses it at load.

Run `python -m tools.zoo_table` after a change to what decides them (`engine/schedulers.py`,
`engine/architectures.py`, the slots' fit, the disk tier's cache kinds) or an mlx-lm upgrade;
`tests/zoo/test_docs_table.py` fails while the committed table is stale. The models are the
zoo's configs instantiated without weights (their parameters are never evaluated): the decisions
read only the caches a model makes and its architecture.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "concepts" / "architecture.md"
START = "<!-- zoo-table:start (python -m tools.zoo_table) -->"
END = "<!-- zoo-table:end -->"


@dataclass(frozen=True)
class Row:
    """One architecture's line of the table."""

    architecture: str
    caches: str = ""
    cpu: str = ""
    gpu: str = ""
    batched: str = ""
    prompt_cache: str = ""
    disk: str = ""
    drafts: str = ""
    refused: str = ""  # why the engine refuses it at load ("" : it serves)


def _model(model_type: str) -> Any:
    """The zoo's model of `model_type`, its parameters never evaluated."""
    from mlx_lm.utils import _get_classes

    from tests.support.zoo import zoo_config

    config = zoo_config(model_type, 3456)
    model_class, args_class = _get_classes(config)
    return model_class(args_class.from_dict(config))


def row(model_type: str) -> Row:
    """What the engine does with `model_type`."""
    from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
    from mlx_responses.service.engine.model import plain_caches
    from mlx_responses.service.engine.prompt_cache.disk import CLASSES
    from mlx_responses.service.engine.schedulers import resolve_engine

    from tests.support.zoo import REFUSED_WHY

    if model_type in REFUSED_WHY:
        return Row(model_type, refused=REFUSED_WHY[model_type])
    model = _model(model_type)
    kinds = sorted({type(c).__name__ for c in make_prompt_cache(model)})
    cpu, gpu = (resolve_engine("auto", model, device) for device in ("cpu", "gpu"))
    plain = plain_caches(model)
    drafts = "yes"
    if cpu == "serial":
        drafts = "no: one at a time"
    elif cpu == "batch" and not plain:  # the startup log says so too (worker.py)
        drafts = "no: caches cannot rewind"
    return Row(
        model_type,
        caches=", ".join(kinds),
        cpu=cpu,
        gpu=gpu,
        batched="no: one at a time" if cpu == "serial" else "yes",
        prompt_cache="any shared prefix" if plain else "exact prefixes (checkpoints)",
        disk="yes" if all(k in CLASSES for k in kinds) else "no",
        drafts=drafts,
    )


def render(rows: list[Row]) -> str:
    """The table (markdown), refused architectures last."""
    served = [r for r in rows if not r.refused]
    refused = [r for r in rows if r.refused]
    lines = [
        f"{len(served)} of mlx-lm's {len(rows)} text architectures serve; "
        f"{len(refused)} are refused at load.",
        "",
        "| Architecture | Caches | Scheduler (CPU) | Scheduler (GPU) | Batched "
        "| Prompt cache reuse | Disk tier | ngram drafts (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in served:
        lines.append(
            f"| {r.architecture} | {r.caches} | {r.cpu} | {r.gpu} | {r.batched} "
            f"| {r.prompt_cache} | {r.disk} | {r.drafts} |"
        )
    lines += ["", "| Refused at load | Why |", "|---|---|"]
    lines += [f"| {r.architecture} | {r.refused} |" for r in refused]
    lines += ["", "| Served, not 4-bit | Why |", "|---|---|"]
    lines += [f"| {a} | {why} |" for a, why in sorted(_not_quantized().items())]
    return "\n".join(lines)


def _not_quantized() -> dict[str, str]:
    from tests.support.zoo import NOT_QUANTIZED

    return NOT_QUANTIZED


def table() -> str:
    from tests.support.zoo import text_architectures

    return render([row(a) for a in text_architectures()])


def with_table(page: str, text: str) -> str:
    """`page` with the region between the markers replaced by `text`."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(page):
        raise ValueError(f"{PAGE} has no {START} ... {END} region")
    return pattern.sub(lambda _: f"{START}\n{text}\n{END}", page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    fresh = with_table(page, table())
    if args.check:
        return 0 if fresh == page else 1
    PAGE.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
