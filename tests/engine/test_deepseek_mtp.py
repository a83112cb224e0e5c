"""DeepSeek-V3's own MTP layer drafting (service/engine/deepseek_mtp.py): read from the
checkpoint as it ships, and greedy output identical with it drafting and without, four at once
and alone, on the zoo's DeepSeek-V3-shaped model (multi-head latent attention, a mixture of
experts in the head's layer too)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten
from mlx_responses.service.engine.deepseek_mtp import (
    DeepseekMTPHead,
    DeepseekMTPModel,
    load_deepseek_mtp,
    prefix,
)
from mlx_responses.service.engine.mlx_lm_compat import KVCache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.mtp import MTPModel, checkpoint_tensors
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.schedulers import resolve_engine
from mlx_responses.service.engine.worker import EngineWorker, device_kind

from tests.engine.test_speculative import PROMPTS as SPECULATIVE_PROMPTS
from tests.support.deepseek_mtp_head import add_deepseek_mtp_head
from tests.support.engine import generate, greedy
from tests.support.oracle_drafts import with_oracle
from tests.support.zoo import build_zoo_model

PROMPTS = (*SPECULATIVE_PROMPTS, "Count with me: one, two, three, four")
TOKENS = 16


FAMILIES = ["deepseek_v3", "glm4_moe", "glm4_moe_lite"]  # latent attention, grouped-query, latent


@pytest.fixture(scope="module")
def with_mtp(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`model_type` -> the zoo's random model of it with a random MTP layer in its checkpoint
    (DeepSeek-V3, and GLM-4.5 and GLM-4.7-Flash, which ship theirs so), built once."""
    built: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in built:
            folder = build_zoo_model(family, tmp_path_factory.mktemp(family) / "model")
            built[family] = add_deepseek_mtp_head(folder)
        return built[family]

    return get


@pytest.fixture
def deepseek_mtp(with_mtp: Callable[[str], Path]) -> Path:
    return with_mtp("deepseek_v3")


@pytest.fixture
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts at every step, whatever the head costs: the mechanics under test, not the policy."""
    monkeypatch.setattr(MTPModel, "cost_ratio", lambda self: 0.0)


@pytest.fixture
def head_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The widths of the positions the head reads (its forwards: drafts and catch-ups)."""
    widths: list[int] = []
    call = DeepseekMTPModel.draft_hidden

    def spy(self: DeepseekMTPModel, tokens: mx.array, *args: Any) -> mx.array:
        widths.append(tokens.shape[1])
        return call(self, tokens, *args)

    monkeypatch.setattr(DeepseekMTPModel, "draft_hidden", spy)
    return widths


@pytest.mark.parametrize("family", FAMILIES)
def test_the_layer_is_read_from_the_checkpoint(
    family: str, with_mtp: Callable[[str], Path], tmp_path: Path
) -> None:
    """Its tensors, as the checkpoint names them (experts apart, `kv_b_proj` whole), load into
    the head exactly; the model itself loads without them (mlx-lm drops DeepSeek-V3's layer 61
    only)."""
    deepseek_mtp = with_mtp(family)
    loaded = load_model(deepseek_mtp)
    paired = load_deepseek_mtp(loaded.model, deepseek_mtp)
    assert paired is not None and paired.kind == "mtp"
    mx.random.seed(3)  # as the checkpoint's head was drawn
    written = dict(tree_flatten(DeepseekMTPHead(loaded.model).parameters()))
    read = dict(tree_flatten(paired.head.parameters()))
    assert written.keys() == read.keys()
    assert all(mx.array_equal(written[k], read[k]).item() for k in written)
    # Positions read in one forward as one at a time (its mask, rope offsets, latent cache).
    tokens = mx.random.randint(0, loaded.vocab_size, (2, 5))
    features = mx.random.normal((2, 5, paired.features))
    whole = paired.head(paired.embed(tokens), features, [KVCache()])
    cache = [KVCache()]
    steps = [
        paired.head(paired.embed(tokens[:, i : i + 1]), features[:, i : i + 1], cache)
        for i in range(5)
    ]
    assert mx.allclose(whole, mx.concatenate(steps, axis=1), atol=1e-4).item()
    # A checkpoint whose layer leaves its head out predicts through the model's own.
    found = checkpoint_tensors(deepseek_mtp, prefix(loaded.model))
    without = {k: v for k, v in found.items() if "shared_head.head" not in k}
    bare = tmp_path / "bare"
    shutil.copytree(deepseek_mtp, bare)
    mx.save_safetensors(str(bare / "model-mtp.safetensors"), without)
    shared = load_deepseek_mtp(loaded.model, bare)
    assert shared is not None
    assert mx.array_equal(shared.head.shared_head.head.weight, loaded.model.lm_head.weight).item()
    # A checkpoint without the layer has no head.
    assert load_deepseek_mtp(loaded.model, deepseek_mtp.parent) is None


@pytest.mark.parametrize("family", FAMILIES)
async def test_greedy_output_is_identical_with_the_mtp_layer(
    family: str, with_mtp: Callable[[str], Path], always_draft: None, head_reads: list[int]
) -> None:
    """Four at once over two turns (the second from prompt-cache entries holding the head's
    caches), and alone; the head drafting (it is read)."""
    deepseek_mtp = with_mtp(family)
    requests = greedy(PROMPTS, TOKENS)
    run: dict[str, Any] = {"engine": "batch", "speculative": "ngram", "num_draft_tokens": 3}
    plain, off = await generate(deepseek_mtp, requests, turns=2, **(run | {"mtp": False}))
    assert off.prompt_cache_hits > 0 and not head_reads
    fast, stats = await generate(deepseek_mtp, requests, turns=2, **run)
    assert fast == plain
    assert stats.verify_steps > 0 and stats.draft_tokens > 0 and head_reads
    head_reads.clear()
    (single,), alone = await generate(deepseek_mtp, requests[:1], **run)
    assert single == plain[0] and alone.verify_steps > 0 and head_reads


async def test_sampled_requests_draft_with_the_layer_reproducibly(
    deepseek_mtp: Path, always_draft: None, head_reads: list[int]
) -> None:
    """A seeded request at 0.7 drafts from the head (its draws from the head's distribution,
    kept by exact speculative sampling) and gives the same tokens from a fresh engine as from
    its prompt-cache entry's."""
    sampling = SamplingParams(max_tokens=TOKENS, temperature=0.7, seed=1)
    requests = [(PROMPTS[0], sampling, [])]
    run: dict[str, Any] = {"engine": "batch", "speculative": "ngram", "num_draft_tokens": 3}
    first, stats = await generate(deepseek_mtp, requests, turns=2, **run)
    again, _ = await generate(deepseek_mtp, requests, **run)
    assert first == again and len(first[0]) == TOKENS
    assert stats.draft_tokens > 0 and head_reads


@pytest.mark.parametrize("engine", ["auto", "slots"])
async def test_a_model_drafting_with_a_head_runs_on_the_batch_never_the_slots(
    engine: str, deepseek_mtp: Path
) -> None:
    """The slots hold no head's caches (docs/guides/drafting-heads.md): a model whose head
    drafts runs on mlx-lm's batch whatever `--engine` asks; without it (--no-mtp), where the
    slots serve it (a CPU: this model's plain latent caches), it stays on them."""
    engines = []
    for mtp in (True, False):
        load = partial(load_model, deepseek_mtp)
        worker = EngineWorker(load, engine=engine, speculative="ngram", mtp=mtp)
        loaded = await worker.start()
        engines.append(worker.engine)
        worker.stop()
    assert engines == ["batch", resolve_engine(engine, loaded.model, device_kind())]
    if device_kind() == "cpu":
        assert engines[1] == "slots"


async def test_drafts_kept_whole_or_in_part_leave_the_output_unchanged(
    deepseek_mtp: Path, always_draft: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's drafts replaced by the greedy output itself (an oracle), wrong after the
    first on some rows: verifies keep all drafts or a part (the latent caches of the model and
    the head trimmed alike), and the output stays the greedy one."""
    plain, fast, stats = await with_oracle(deepseek_mtp, greedy(PROMPTS, TOKENS), monkeypatch)
    assert fast == plain
    assert stats.draft_tokens > stats.accepted_tokens > stats.verify_steps > 0
