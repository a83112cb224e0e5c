"""--speculative draft: a draft model inside the batch leaves greedy output token-identical."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from mlx_responses.service.engine import speculation as speculative
from mlx_responses.service.engine.draft_model import DraftedModel, DraftModelError
from mlx_responses.service.engine.model import load_model
from mlx_responses.service.engine.requests import SamplingParams
from mlx_responses.service.engine.speculation import SpeculationPolicy
from mlx_responses.service.engine.worker import EngineWorker

from tests.engine.test_speculative import PROMPTS, _ban
from tests.support.engine import admit, generate, greedy, step_tokens
from tests.support.random_model import build_random_model


@pytest.fixture(scope="module")
def head32_target(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A random target whose head dimension (32) --kv-bits can quantize."""
    return build_random_model(
        tmp_path_factory.mktemp("target") / "target",
        hidden_size=128,
        intermediate_size=256,
        seed=5,
        tokenizer_from=model_path,
    )


@pytest.fixture(scope="module")
def wrong_draft(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A smaller random model of the same vocabulary: its drafts are mostly wrong."""
    return build_random_model(
        tmp_path_factory.mktemp("draft") / "draft",
        hidden_size=64,
        intermediate_size=128,
        heads=2,
        kv_heads=1,
        layers=1,
        seed=11,
        tokenizer_from=model_path,
    )


@pytest.fixture
def always_draft(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts at every step, whatever the draft costs: the mechanics under test, not the policy."""
    monkeypatch.setattr(DraftedModel, "cost_ratio", lambda self: 0.0)


@pytest.fixture
def intermittent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drafts on 3 steps out of every 10: on the other 7 the draft's cache lags the target's,
    catching up at 5 behind and when drafting resumes."""
    calls = itertools.count()
    width = speculative.best_width

    def schedule(*args: Any) -> int:
        return width(*args) if next(calls) % 10 >= 7 else 0

    monkeypatch.setattr(speculative, "best_width", schedule)
    monkeypatch.setattr(speculative, "MAX_LAG", 5)


def _requests(tokens: int) -> list[tuple[str, SamplingParams, list[object]]]:
    requests = greedy(PROMPTS, tokens)
    # A constrained sequence in the same batch decodes normally inside verify steps.
    requests.append((PROMPTS[0], SamplingParams(max_tokens=tokens, temperature=0.0), [_ban(13)]))
    return requests


Outputs = list[tuple[int, ...]]


@pytest.fixture(scope="module")
def undrafted() -> dict[tuple[str, int | None], Outputs]:
    """The target's output without speculation, by engine and --kv-bits: the same whichever
    draft and policy a case tries, so each is generated once for the module, not per case."""
    return {}


async def _undrafted(
    cache: dict[tuple[str, int | None], Outputs],
    target: Path,
    engine: str,
    kv_bits: int | None,
) -> Outputs:
    if (engine, kv_bits) not in cache:
        turns = 2 if kv_bits is None else 1
        extra = {} if kv_bits is None else {"kv_bits": kv_bits}
        cache[engine, kv_bits], _ = await generate(
            target, _requests(40), turns=turns, engine=engine, **extra
        )
    return cache[engine, kv_bits]


@pytest.mark.parametrize("engine", ["batch", "slots"])
@pytest.mark.parametrize("policy", ["always", "intermittent"])
@pytest.mark.parametrize("which", ["wrong", "same"])
async def test_greedy_output_is_identical_with_a_draft_model(
    *,
    which: str,
    policy: str,
    engine: str,
    head32_target: Path,
    wrong_draft: Path,
    undrafted: dict[tuple[str, int | None], Outputs],
    request: pytest.FixtureRequest,
) -> None:
    """Drafting at every step, or now and then (on the batch engine with the draft's cache
    lagging in between; the slots' draft reads every step)."""
    request.getfixturevalue("always_draft")
    if policy == "intermittent":
        request.getfixturevalue("intermittent")
    draft = wrong_draft if which == "wrong" else head32_target
    requests = _requests(40)
    plain = await _undrafted(undrafted, head32_target, engine, None)
    # Two turns: the second starts from prompt-cache entries holding both models' caches.
    on = {
        "speculative": "draft",
        "num_draft_tokens": 4,
        "load_draft": lambda: load_model(draft),
        "engine": engine,
    }
    fast, stats = await generate(head32_target, requests, turns=2, **on)
    assert fast == plain
    assert stats.verify_steps > 0 and stats.prompt_cache_hits > 0
    if which == "same":
        # The target drafting for itself: (nearly) every draft is right; the step count shows
        # that several tokens came per step.
        assert stats.accepted_tokens >= 0.9 * stats.draft_tokens > 0
        assert stats.decode_steps < (0.6 if policy == "always" else 0.9) * stats.generated_tokens
    else:
        # Random models fall into loops, where they agree; elsewhere the drafts miss.
        assert stats.accepted_tokens < 0.9 * stats.draft_tokens
    # Alone, and on a quantized KV cache, it is the same decode as without speculation.
    (single,), _ = await generate(head32_target, requests[:1], **on)
    assert single == plain[0]
    q8 = await _undrafted(undrafted, head32_target, engine, 8)
    q8_fast, q8_stats = await generate(head32_target, requests, kv_bits=8, **on)
    assert q8_fast == q8 and q8_stats.verify_steps > 0


async def test_a_draft_model_with_another_tokenizer_fails_startup(
    tmp_path: Path, head32_target: Path, wrong_draft: Path
) -> None:
    other = tmp_path / "other-vocab"
    shutil.copytree(wrong_draft, other)
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    tokenizer["added_tokens"].append(
        {
            "id": len(tokenizer["model"]["vocab"]) + len(tokenizer["added_tokens"]),
            "content": "<|draft_only|>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    )
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    engine = EngineWorker(
        lambda: load_model(head32_target),
        speculative="draft",
        load_draft=lambda: load_model(other),
    )
    with pytest.raises(DraftModelError, match="does not share the tokenizer"):
        await engine.start()


def _same_keys(ours: Any, theirs: Any, start: int, end: int) -> bool:
    import mlx.core as mx

    return bool(
        mx.allclose(ours.keys[..., start:end, :], theirs.keys[..., start:end, :], atol=1e-3).item()
    )


@pytest.mark.parametrize(
    "case",
    [
        ("same", "always", None),
        ("wrong", "always", None),
        ("same", "intermittent", None),
        ("wrong", "intermittent", None),
        ("same", "intermittent", 8),
    ],
    ids=lambda case: "-".join(map(str, case)),
)
def test_the_draft_cache_stays_aligned_with_the_target_cache(
    case: tuple[str, str, int | None],
    head32_target: Path,
    wrong_draft: Path,
    always_draft: None,
    request: pytest.FixtureRequest,
) -> None:
    """Both caches hold the same positions whenever the draft has caught up (same sizes,
    padding, offsets), and otherwise the draft is `lag` positions behind in every row; with
    the target as its own draft they hold the same keys too, so any position kept, dropped or
    caught up wrongly in the draft's cache shows up. Intermittent drafting lags the draft
    through steps without drafts, then drafts again; a sequence is merged and sequences
    finish (prompt-cache extract) while it lags, and their entries hold both caches at the
    same offsets."""
    from mlx_lm.generate import BatchGenerator
    from mlx_responses.service.engine.batch.quantized_cache import mergeable
    from mlx_responses.service.engine.batch.speculative import SpeculativeGenerationBatch
    from mlx_responses.service.engine.kv_quant import kv_group_size, new_sequence_cache

    which, policy, kv_bits = case
    if policy == "intermittent":
        request.getfixturevalue("intermittent")
    loaded = load_model(head32_target)
    draft = loaded.model if which == "same" else load_model(wrong_draft).model
    pair = DraftedModel(loaded.model, draft, loaded.vocab_size)
    generator = BatchGenerator(pair, completion_batch_size=8)
    batch = SpeculativeGenerationBatch.empty(pair, generator.sampler)
    batch.num_draft, batch.drafted = 4, pair
    generator._generation_batch = batch
    group = kv_group_size(loaded.model)
    assert group is not None

    def insert(texts: tuple[str, ...], max_tokens: list[int]) -> list[int]:
        caches = None
        if kv_bits is not None:
            caches = [mergeable(new_sequence_cache(pair, group, kv_bits)) for _ in texts]
        prompts = [loaded.tokenizer.encode(p) for p in texts]
        uids: list[int] = admit(generator, prompts, max_tokens=max_tokens, caches=caches)
        batch.eligible.update(uids)
        return uids

    lags: dict[str, list[int]] = {"extend": [], "extract_cache": []}
    for name, seen in lags.items():
        method = getattr(batch, name)

        def spy(*args: Any, _method: Any = method, _seen: list[int] = seen) -> Any:
            _seen.append(batch.lag)
            return _method(*args)

        setattr(batch, name, spy)

    uids = insert(PROMPTS, [30, 19, 24])
    # A row that never drafts (as a sampled or constrained one) makes the rejections ragged.
    batch.eligible.discard(uids[1])
    checked, running, merged = 0, set(uids), False
    while running:
        if not merged and batch.lag >= 2:
            running.update(insert(PROMPTS[1:2], [16]))
            merged = True
        for r in step_tokens(generator):
            if r.finish_reason is None:
                continue
            running.discard(r.uid)
            entry = r.prompt_cache
            for i, draft_entry in enumerate(entry[pair.split :]):
                assert draft_entry.offset == entry[i].offset == len(r.all_tokens)
                if which == "same" and kv_bits is None:
                    assert _same_keys(entry[i], draft_entry, 0, draft_entry.offset)
        if not len(batch):
            continue
        lag, target = batch.lag, batch.prompt_cache[0]
        for i, draft_cache in enumerate(batch.prompt_cache[pair.split :]):
            assert draft_cache.size() + lag == target.size()
            assert target.left_padding.tolist() == draft_cache.left_padding.tolist()
            assert (target.offset - lag).tolist() == draft_cache.offset.tolist()
            if which == "same" and kv_bits is None:
                start = max(target.left_padding.tolist())
                assert _same_keys(batch.prompt_cache[i], draft_cache, start, draft_cache.size())
        checked += 1
    assert checked > 5 and batch.verify_steps > 0 and batch.accepted_tokens > 0
    if which == "wrong":
        assert batch.accepted_tokens < batch.drafted_tokens
    if policy == "intermittent":
        # The cases under test happened: a merge and an extract with the draft behind.
        assert merged and max(lags["extend"]) > 0 and max(lags["extract_cache"]) > 0


@pytest.mark.parametrize("policy", ["always", "intermittent"])
@pytest.mark.parametrize("which", ["same", "wrong"])
def test_the_slots_draft_keys_stay_aligned_with_the_target_keys(
    *,
    which: str,
    policy: str,
    head32_target: Path,
    wrong_draft: Path,
    always_draft: None,
    request: pytest.FixtureRequest,
) -> None:
    """On the fixed slots the draft's layers have slots of their own, lagging the target's
    on steps that do not draft (at most MAX_LAG positions): after every step each live
    sequence's draft slot holds the positions it has read as its target slot holds them (with
    the target as its own draft, the same keys), however many drafts were kept; a sequence
    joining while others draft, and finished ones' prompt-cache entries (caught up), hold both
    at the same offsets."""
    if policy == "intermittent":
        request.getfixturevalue("intermittent")
    from mlx_responses.service.engine.slots import SlotScheduler

    loaded = load_model(head32_target)
    draft = loaded.model if which == "same" else load_model(wrong_draft).model
    pair = DraftedModel(loaded.model, draft, loaded.vocab_size)
    spec = SpeculationPolicy(4, pair)
    generator = SlotScheduler(
        pair,
        stop_tokens=[],
        completion_batch_size=8,
        prefill_batch_size=8,
        prefill_step_size=64,
        speculation=spec,
    )

    def insert(texts: tuple[str, ...], max_tokens: list[int]) -> list[int]:
        prompts = [loaded.tokenizer.encode(p) for p in texts]
        uids: list[int] = admit(generator, prompts, max_tokens=max_tokens)
        spec.eligible.update(uids)
        return uids

    uids = insert(PROMPTS, [30, 19, 24])
    # A row that never drafts (as a sampled or constrained one) makes the rejections ragged.
    spec.eligible.discard(uids[1])
    stores = generator._stores
    checked, running, joined, lags = 0, set(uids), False, [0]
    while running:
        if not joined and spec.verify_steps >= 2:
            running.update(insert(PROMPTS[1:2], [16]))
            joined = True
        for r in step_tokens(generator):
            if r.finish_reason is None:
                continue
            running.discard(r.uid)
            entry = r.prompt_cache
            for i, draft_entry in enumerate(entry[pair.split :]):
                assert draft_entry.offset == entry[i].offset == len(r.all_tokens)
                if which == "same":
                    assert _same_keys(entry[i], draft_entry, 0, draft_entry.offset)
        for seq in generator.slots:
            if seq is None or not seq.ready:
                continue
            n, read = len(seq.tokens), seq.drafted_to
            assert 0 <= n - read <= speculative.MAX_LAG
            lags.append(n - read)
            for i, own in enumerate(stores[pair.split :]):
                target = stores[i]
                assert target.keys is not None and own.keys is not None
                if which == "same":
                    row = slice(seq.slot, seq.slot + 1)
                    assert mx.allclose(
                        target.keys[row, :, :read], own.keys[row, :, :read], atol=1e-3
                    ).item()
            checked += 1
    assert checked > 5 and joined and spec.verify_steps > 0 and spec.accepted_tokens > 0
    if policy == "intermittent":
        assert max(lags) == speculative.MAX_LAG  # lagged to the bound, then caught up
    if which == "wrong":
        assert spec.accepted_tokens < spec.drafted_tokens
    else:
        assert spec.accepted_tokens == spec.drafted_tokens
