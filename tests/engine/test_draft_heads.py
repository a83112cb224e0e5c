"""EAGLE-3 and DFlash drafter folders (`--speculative draft --draft-model PATH`, the kind read
from the folder's config: draft_folder.py): greedy output is the output without drafting,
alone and four at once, on a plain-cache target (EAGLE-3) and a hybrid one (DFlash: its
recurrent states computed again after a rejected draft)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.draft_folder import head_kind
from mlx_responses.service.engine.draft_model import DraftModelError
from mlx_responses.service.engine.heads import HeadedModel
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.worker import EngineWorker

from tests.engine.test_mtp import PROMPTS
from tests.support.drafter_folders import write_dflash, write_eagle3
from tests.support.engine import generate, greedy
from tests.support.random_model import build_random_model
from tests.support.zoo import build_zoo_model


@pytest.fixture(scope="module")
def llama4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 4-layer target with plain KV caches."""
    return build_random_model(tmp_path_factory.mktemp("target") / "model", layers=4, seed=4)


@pytest.fixture(scope="module")
def qwen35(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_zoo_model("qwen3_5", tmp_path_factory.mktemp("qwen35") / "model")


@pytest.fixture
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts at every step, whatever the head costs (by its bytes, or as the steps' clock
    measures it): the mechanics under test, not the policy."""
    monkeypatch.setattr(HeadedModel, "cost_ratio", lambda self: 0.0)
    monkeypatch.setattr(
        speculation.StepClock,
        "best_width",
        lambda self, likely, batch, extra=0.0: speculation.best_width(likely, batch, extra),
    )


@pytest.mark.parametrize("kind", ["eagle3", "dflash"])
async def test_greedy_output_is_identical_with_a_drafting_head(
    kind: str,
    llama4: Path,
    qwen35: Path,
    tmp_path: Path,
    always_draft: None,
) -> None:
    if kind == "eagle3":
        target, folder = llama4, write_eagle3(tmp_path / "eagle3", llama4, layers=(1, 2, 3))
    else:
        target, folder = qwen35, write_dflash(tmp_path / "dflash", qwen35, layers=[0, 1])
    assert head_kind(folder) == kind and head_kind(target) is None
    requests = greedy(PROMPTS, 20)
    plain, _ = await generate(target, requests, turns=2, engine="batch")
    on = {"speculative": "draft", "draft_folder": folder, "num_draft_tokens": 3}
    fast, stats = await generate(target, requests, turns=2, engine="batch", **on)
    assert fast == plain
    assert stats.verify_steps > 0 and stats.draft_tokens > 0
    (single,), alone = await generate(target, requests[:1], engine="batch", **on)
    assert single == plain[0] and alone.verify_steps > 0


async def test_a_head_of_another_vocabulary_fails_startup(llama4: Path, tmp_path: Path) -> None:
    folder = write_eagle3(tmp_path / "eagle3", llama4, layers=(1, 2, 3), vocab=300)
    engine = EngineWorker(
        lambda: load_model(llama4), speculative="draft", draft_folder=folder, engine="batch"
    )
    with pytest.raises(DraftModelError, match="token ids"):
        await engine.start()
    engine.stop()
