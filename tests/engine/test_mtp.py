"""The checkpoint's own MTP head drafting (service/engine/mtp.py, batch/speculative.py): greedy
output is the output without it, alone and four at once, on a hybrid (Qwen3.5-shaped) model
whose recurrent states are computed again after a rejected draft."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine import speculation
from mlx_responses.service.engine.batch.speculative import SpeculativeGenerationBatch
from mlx_responses.service.engine.mlx_lm_compat import ArraysCache
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.mtp import MTPModel, load_mtp, mtp_weights
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.vision.hybrid import HybridLanguage
from mlx_responses.service.engine.worker import EngineWorker
from mlx_responses.service.models.vision_runtime import load_vision_model

from tests.engine.test_speculative import PROMPTS as SPECULATIVE_PROMPTS
from tests.support.engine import generate, greedy
from tests.support.mtp_head import add_mtp_head
from tests.support.oracle_drafts import with_oracle
from tests.support.random_qwen3_5_vl import build_random_qwen3_5_vl
from tests.support.zoo import build_zoo_model

PROMPTS = (*SPECULATIVE_PROMPTS, "Count with me: one, two, three, four")


@pytest.fixture(scope="module")
def qwen35_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zoo's random Qwen3.5 with a random MTP head in its checkpoint."""
    folder = build_zoo_model("qwen3_5", tmp_path_factory.mktemp("qwen35") / "model")
    return add_mtp_head(folder)


@pytest.fixture(scope="module")
def qwen35_vl_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen3.5 VLM (as Qwen3.5 checkpoints ship: a vision tower beside the hybrid
    language model; its output head tied to its embeddings, as the small ones) with a random
    MTP head in its checkpoint."""
    folder = build_random_qwen3_5_vl(tmp_path_factory.mktemp("qwen35vl") / "model", tied=True)
    return add_mtp_head(folder)


@pytest.fixture
def intermittent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts on 3 steps out of every 10: on the other 7 the head's caches lag the target's,
    reading what they missed at 5 behind, when drafting resumes, and before rows join, leave
    or leave an entry."""
    calls = itertools.count()
    width = speculation.best_width

    def schedule(*args: Any, **kwargs: Any) -> int:
        return width(*args, **kwargs) if next(calls) % 10 >= 7 else 0

    monkeypatch.setattr(speculation, "best_width", schedule)
    monkeypatch.setattr(speculation, "MAX_LAG", 5)


@pytest.fixture
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts at every step, whatever the head costs (by its bytes, or as the steps' clock
    measures it): the mechanics under test, not the policy."""
    monkeypatch.setattr(MTPModel, "cost_ratio", lambda self: 0.0)
    monkeypatch.setattr(
        speculation.StepClock,
        "best_width",
        lambda self, likely, batch, extra=0.0: speculation.best_width(likely, batch, extra),
    )


def test_the_head_is_read_from_the_checkpoint(qwen35_mtp: Path) -> None:
    from mlx_lm.utils import load_model

    weights = mtp_weights(qwen35_mtp)
    assert weights and all(k.startswith("mtp.") for k in weights)
    model, _ = load_model(qwen35_mtp)
    paired = load_mtp(model, qwen35_mtp)
    assert paired is not None and len(paired.head.layers) == 1
    # A checkpoint without the tensors has no head.
    assert load_mtp(model, qwen35_mtp.parent) is None


@pytest.mark.parametrize(
    ("shape", "policy"), [("text", "always"), ("vlm", "always"), ("text", "intermittent")]
)
async def test_greedy_output_is_identical_with_the_mtp_head(
    *,
    shape: str,
    policy: str,
    qwen35_mtp: Path,
    qwen35_vl_mtp: Path,
    always_draft: None,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """On a text Qwen3.5, and on a VLM one (its language side in mlx-lm's batch,
    `vision/hybrid.py`: every forward, a verify's and its recompute's too, is told where its
    rows stand, which the random model's output alone would hardly show); drafting always,
    or now and then (the head's caches lagging in between)."""
    if policy == "intermittent":
        request.getfixturevalue("intermittent")
    folder = qwen35_mtp if shape == "text" else qwen35_vl_mtp
    load = load_model if shape == "text" else lambda p: load_vision_model(p, "qwen3.5")
    told: list[bool] = []
    forward = HybridLanguage.forward_hidden

    def spy(self: HybridLanguage, inputs: mx.array, cache: Any = None) -> Any:
        kv = next(c for c in cache if not isinstance(c, ArraysCache))
        offsets = kv.offset.tolist() if isinstance(kv.offset, mx.array) else [kv.offset]
        told.append(self._starts == offsets or len(self._fed) != inputs.shape[0])
        return forward(self, inputs, cache)

    monkeypatch.setattr(HybridLanguage, "forward_hidden", spy)
    # After every step, the head's caches hold each row's positions but those it has not
    # read yet (the lag): a verify trims both alike, a catch-up reads what was missed.
    aligned: list[bool] = []
    step = SpeculativeGenerationBatch.next

    def checked(self: SpeculativeGenerationBatch) -> Any:
        out = step(self)
        if self.uids and self.headed is not None:
            kvs = [c for c in self.prompt_cache[:-1] if not isinstance(c, ArraysCache)]
            target, head = kvs[0].offset.tolist(), kvs[-1].offset.tolist()
            lag = len(self._unread)
            aligned.append(all(h + lag == t for h, t in zip(head, target, strict=True)))
        return out

    monkeypatch.setattr(SpeculativeGenerationBatch, "next", checked)
    requests = greedy(PROMPTS, 24)
    # Two turns: the second starts from prompt-cache entries holding the head's caches too.
    run: dict[str, Any] = {"engine": "batch", "loader": load, "speculative": "ngram"}
    # Without drafting (--speculative off: no head either).
    plain, off = await generate(folder, requests, turns=2, **(run | {"speculative": "off"}))
    assert off.verify_steps == 0 and off.prompt_cache_hits > 0
    fast, stats = await generate(folder, requests, turns=2, num_draft_tokens=3, **run)
    assert fast == plain
    # A random head's drafts are rejected: every verify computes the recurrent states again.
    assert stats.verify_steps > 0 and stats.draft_tokens > 0
    (single,), alone = await generate(folder, requests[:1], num_draft_tokens=3, **run)
    assert single == plain[0] and alone.verify_steps > 0
    assert all(told) and (shape == "text") == (not told)
    assert aligned and all(aligned)


async def test_sampled_requests_draft_with_the_head_and_count_their_drafts(
    qwen35_mtp: Path, always_draft: None
) -> None:
    """Sampled requests speculate too (exact acceptance: acceptance.py, whose rule the
    chi-square test holds): a seeded one is reproducible, and the drafts proposed and kept
    reach each stream's chunks (the response's usage) and the engine's counters."""
    worker = EngineWorker(
        lambda: load_model(qwen35_mtp), engine="batch", speculative="ngram", num_draft_tokens=3
    )
    loaded = await worker.start()
    try:
        sampling = SamplingParams(max_tokens=24, temperature=0.7, seed=1)
        prompt: Any = loaded.tokenizer.encode(PROMPTS[0])
        drafted: list[int] = []
        runs = []
        for _ in range(2):
            tokens, proposed = [], 0
            async for chunks in worker.submit(prompt, sampling).batches():
                for chunk in chunks:
                    tokens.extend(chunk.token_ids)
                    proposed += chunk.draft_tokens
            runs.append(tokens)
            drafted.append(proposed)
    finally:
        worker.stop()
    assert runs[0] == runs[1] and len(runs[0]) == 24
    assert sum(drafted) == worker.stats.draft_tokens > 0


@pytest.mark.parametrize("shape", ["text", "vlm"])
async def test_a_verify_that_keeps_rejected_recurrent_state_is_caught(
    shape: str,
    qwen35_mtp: Path,
    qwen35_vl_mtp: Path,
    always_draft: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted wrong: a verify that leaves the recurrent states as the rejected drafts left
    them (no recompute on the text model, no roll-back from the recorded states on the VLM)
    changes the greedy output, so the identity above can fail."""
    folder = qwen35_mtp if shape == "text" else qwen35_vl_mtp
    load = load_model if shape == "text" else lambda p: load_vision_model(p, "qwen3.5")
    requests = greedy(PROMPTS, 24)
    on: dict[str, Any] = {"engine": "batch", "loader": load, "speculative": "ngram"}
    plain, _ = await generate(folder, requests, engine="batch", mtp=False, loader=load)

    def keep_without_rollback(self: SpeculativeGenerationBatch, inputs: Any, kept: Any) -> None:
        self._before, self._recorded = [], None
        original(self, inputs, kept)

    original = SpeculativeGenerationBatch._keep_head
    monkeypatch.setattr(SpeculativeGenerationBatch, "_keep_head", keep_without_rollback)
    wrong, _ = await generate(folder, requests, num_draft_tokens=3, **on)
    assert wrong != plain


async def test_drafts_kept_whole_or_in_part_leave_the_output_unchanged(
    qwen35_mtp: Path, always_draft: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's drafts replaced by the greedy output itself (an oracle), wrong after the
    first on some rows: verifies keep all drafts, or a part (recurrent states computed again
    for those rows only), and the output stays the greedy one."""
    plain, fast, stats = await with_oracle(qwen35_mtp, greedy(PROMPTS, 24), monkeypatch)
    assert fast == plain
    assert stats.draft_tokens > stats.accepted_tokens > stats.verify_steps > 0


TRAINED = Path(__file__).resolve().parents[2] / "service" / "assets" / "tiny-qwen35-mtp"


async def test_the_trained_head_keeps_the_output_and_most_of_its_drafts() -> None:
    """The trained tiny Qwen3.5 (service/assets/tiny-qwen35-mtp, a VLM as Qwen3.5 ships, its
    head trained on its own continuations): greedy output identical with its head drafting
    and without, four at once and alone, and many of its drafts kept (real acceptance, so
    whole drafts and partial ones both occur)."""
    from training.tiny_chat.data import eval_prompts

    loaded = load_vision_model(TRAINED, "tiny")
    chats = [p.messages for b in ("echo", "think") for p in eval_prompts(b, 2)]
    render = loaded.tokenizer.apply_chat_template
    texts = [render(c, add_generation_prompt=True, tokenize=False) for c in chats]
    requests = greedy(texts, 32)
    run: dict[str, Any] = {"engine": "batch", "loader": lambda p: load_vision_model(p, "tiny")}
    plain, _ = await generate(TRAINED, requests, speculative="off", **run)
    fast, stats = await generate(TRAINED, requests, speculative="ngram", **run)
    assert fast == plain
    assert stats.accepted_tokens >= 0.3 * stats.draft_tokens > 0
    (single,), alone = await generate(TRAINED, requests[:1], speculative="ngram", **run)
    assert single == plain[0] and alone.accepted_tokens > 0
