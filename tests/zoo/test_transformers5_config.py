"""A config as transformers 5 writes nemotron_h's: its block list and no `num_hidden_layers`
(mlx-lm derives it). The memory budget reads the model's sizes as mlx-lm does, from the loaded
model (before: `KeyError: 'num_hidden_layers'` in kv_layout.py, and the engine never started)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from mlx_responses.service.engine.memory.budget import MemoryBudget
from mlx_responses.service.engine.mlx_lm_compat import make_prompt_cache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.worker import EngineWorker

from tests.support.engine import collect


async def test_nemotron_h_without_a_layer_count_serves_under_a_budget(
    zoo_model: Callable[[str], Path], tmp_path: Path
) -> None:
    path = tmp_path / "nemotron_h_tf5"
    shutil.copytree(zoo_model("nemotron_h"), path)
    config = json.loads((path / "config.json").read_text())
    blocks = {"M": "mamba", "*": "attention", "-": "mlp"}
    config["layers_block_type"] = [blocks[c] for c in config.pop("hybrid_override_pattern")]
    del config["num_hidden_layers"]
    (path / "config.json").write_text(json.dumps(config))
    budget = MemoryBudget(1 << 40, measure_runtime=lambda: 0)
    engine = EngineWorker(lambda: load_model(path), memory=budget)
    loaded = await engine.start()
    try:
        layout = engine.kv.account.layout  # type: ignore[union-attr]
        # A cache per mamba or attention block (the MLP block keeps none).
        assert layout.layers == len(make_prompt_cache(loaded.model)) == 2
        sampling = SamplingParams(max_tokens=4, temperature=0.0)
        ids = await collect(engine.submit(loaded.tokenizer.encode("Hello"), sampling))
        assert len(ids) == 4
    finally:
        engine.stop()
