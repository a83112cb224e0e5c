"""The trained tiny Qwen3.5 with its own MTP head (service/assets/tiny-qwen35-mtp) and its EAGLE-3
drafter (service/assets/tiny-qwen35-eagle3), from training/tiny_drafter: mlx-lm and mlx-vlm load
the same language model, mlx-vlm's drafter classes load the checkpoint's own `mtp.*` tensors and
the EAGLE-3 folder, and their drafts, run by mlx-vlm's own speculative decoding, are accepted
above a floor on held-out prompts (greedy, so the counts are deterministic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from training.tiny_drafter.measure import Acceptance, acceptance, held_out_prompts, load

ASSETS = Path(__file__).resolve().parents[2] / "service" / "assets"
MODEL_DIR = ASSETS / "tiny-qwen35-mtp"
EAGLE3_DIR = ASSETS / "tiny-qwen35-eagle3"
# The committed head accepts 71% (91 of 128) of its drafts on these prompts (greedy, 6 per
# behaviour, 48 tokens each); an untrained head about 10%, the head trained on the garbage the
# model answered to a rebuilt tokenizer's letter pairs 10% too. The floor sits under that.
FLOOR = 0.5
# The EAGLE-3 drafter on the same prompts, 2 drafts a round: 37% (64 of 172); random, ~10%.
EAGLE3_FLOOR = 0.25


@pytest.fixture(scope="module")
def loaded() -> tuple[Any, Any, Any]:
    return load(MODEL_DIR)


def test_mlx_lm_and_mlx_vlm_load_the_same_language_model(loaded: tuple[Any, Any, Any]) -> None:
    import mlx.core as mx
    from mlx_lm.utils import load_model

    model, tokenizer, _ = loaded
    text, _ = load_model(MODEL_DIR)  # the mtp.* tensors are dropped, nothing else is missing
    ids = mx.array([held_out_prompts(tokenizer, 1)[0]])
    ours = model.language_model(ids).logits
    theirs = text(ids)
    assert mx.abs(ours - theirs).max().item() < 1e-3
    assert mx.array_equal(mx.argmax(ours, -1), mx.argmax(theirs, -1))


def test_the_drafter_is_the_checkpoints_own_head(loaded: tuple[Any, Any, Any]) -> None:
    import mlx.core as mx
    from mlx_vlm.speculative.drafters.qwen3_5_mtp import Qwen3_5MTPDraftModel

    _, _, drafter = loaded
    stored = mx.load(str(MODEL_DIR / "model.safetensors"))
    assert isinstance(drafter, Qwen3_5MTPDraftModel)
    assert mx.array_equal(drafter.fc.weight, stored["mtp.fc.weight"])
    assert mx.array_equal(
        drafter.layers[0].self_attn.q_proj.weight, stored["mtp.layers.0.self_attn.q_proj.weight"]
    )


def test_greedy_drafts_are_accepted_above_the_floor(loaded: tuple[Any, Any, Any]) -> None:
    from training.tiny_chat.tokenizer import IM_END

    model, tokenizer, drafter = loaded
    prompts = held_out_prompts(tokenizer, 6)
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    a: Acceptance = acceptance(model, drafter, prompts, eos, temperature=0.0, max_tokens=48)
    assert a.drafted > 80
    assert a.rate >= FLOOR, a


def test_the_eagle3_folder_loads_as_mlx_vlms_drafter_and_its_drafts_are_accepted(
    loaded: tuple[Any, Any, Any],
) -> None:
    import mlx.core as mx
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.eagle3 import Eagle3DraftModel

    from training.tiny_chat.tokenizer import IM_END

    model, tokenizer, _ = loaded
    drafter, kind = load_drafter(str(EAGLE3_DIR))  # auto-detected from its model_type
    assert kind == "eagle3"
    assert isinstance(drafter, Eagle3DraftModel)
    stored = mx.load(str(EAGLE3_DIR / "model.safetensors"))
    assert mx.array_equal(drafter.fc.weight, stored["fc.weight"])
    eos = tokenizer.convert_tokens_to_ids(IM_END)
    prompts = held_out_prompts(tokenizer, 6)
    a = acceptance(
        model, drafter, prompts, eos, temperature=0.0, max_tokens=48, kind="eagle3", block_size=3
    )
    assert a.drafted > 80
    assert a.rate >= EAGLE3_FLOOR, a


def test_the_served_tokenizer_is_the_one_the_model_was_trained_with() -> None:
    """transformers rebuilds a Qwen3.5's tokenizer (its own split pattern, every merge applied),
    which split tiny-chat's words into letter pairs: the model answered garbage. Served, the
    folder's tokenizer.json is used as written (`declared_tokenizer.py`)."""
    from mlx_responses.service.models.vision_runtime import load_vision_model
    from tokenizers import Tokenizer

    text = "Think hard, then reply with: music."
    trained = Tokenizer.from_file(str(ASSETS / "tiny-chat" / "tokenizer.json")).encode(text).ids
    served = load_vision_model(MODEL_DIR, "tiny").tokenizer
    assert served.encode(text) == trained
    assert len(trained) < 12  # words, not letter pairs
