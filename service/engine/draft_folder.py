"""What a --draft-model folder is: a small model of the same tokenizer (`draft_model.py`), or
a drafting head of mlx-vlm's formats that reads the target's hidden states: EAGLE-3
(`eagle3.py`) or DFlash (`dflash.py`). The folder's config says which; its head is loaded with
mlx-vlm's `load_drafter` (its classes and weight names) and bound to the target."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from mlx_responses.service.engine.draft_model import DraftModelError
from mlx_responses.service.engine.heads import HeadedModel

log = logging.getLogger(__name__)

HEAD_KINDS = ("eagle3", "dflash")


def head_kind(path: Path | None) -> str | None:
    """ "eagle3" or "dflash" for a drafting head's folder, None for a draft model's (or none)."""
    if path is None or not (path / "config.json").exists():
        return None
    config: dict[str, Any] = json.loads((path / "config.json").read_text())
    kind = config.get("speculators_model_type") or config.get("model_type")
    if kind == "eagle3":
        return "eagle3"
    architectures = " ".join(config.get("architectures") or [])
    if "dflash_config" in config or "DFlash" in architectures:
        return "dflash"
    return None


def load_head(model: Any, path: Path, vocab_size: int) -> HeadedModel:
    """`model` with the drafting head in `path` (`head_kind` says it is one); raises
    DraftModelError when the head cannot draft for it (another vocabulary or width)."""
    from mlx_vlm.speculative.drafters import load_drafter

    if hasattr(model, "forward_hidden"):  # a VLM's language side runs its own layer loop
        raise DraftModelError(
            f"--draft-model {path}: EAGLE-3 and DFlash heads draft for text models only"
        )

    loaded: tuple[Any, str] = load_drafter(str(path))
    head, kind = loaded
    head.bind(model)
    if kind == "eagle3":
        from mlx_responses.service.engine.eagle3 import Eagle3Model

        headed: HeadedModel = Eagle3Model(model, head)
        theirs = int(head.target_vocab_size)
    elif kind == "dflash":
        from mlx_responses.service.engine.dflash import DFlashModel

        headed = DFlashModel(model, head)
        theirs = int(head.config.vocab_size)
    else:
        raise DraftModelError(f"--draft-model {path} is a {kind} drafter, not EAGLE-3 or DFlash")
    if theirs != vocab_size:
        raise DraftModelError(
            f"--draft-model {path} drafts over {theirs} token ids, the model has {vocab_size}"
        )
    log.info("%s drafts with the %s head in %s", getattr(model, "model_type", "model"), kind, path)
    return headed
