"""A vision model's part of the engine worker: what an image request brings to its admission.

The worker serves a vision-language model as a text one, on the slots: its language side
(`language.VisionLanguage`) is the model the scheduler calls. An image request is encoded when
it is admitted (`encoder.py`: the vision tower off the decode step, cached by content; the
images of requests admitted together in one call of the tower, `encode_together`), and
admitted with its input embeddings and M-RoPE positions; its prompt-cache key is its tokens with
each image's standing for the image (`cache_key.py`), so its next turn, or the same images
resent, start from the prompt cache as a text conversation does; past a cached prefix that holds
all its images, it is admitted with its positions alone (no tower, no embeddings). A text
request on the same model is admitted as on a text model's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_responses.service.engine.image_prompt import VisionInputs
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.vision.cache_key import keyed_tokens
from mlx_responses.service.engine.vision.encoder import ImageEncoder
from mlx_responses.service.engine.vision.hybrid import HYBRID, HybridLanguage
from mlx_responses.service.engine.vision.language import VisionLanguage, is_vision_model
from mlx_responses.service.engine.vision.positions import MRoPE

__all__ = ["ImageEncoder", "Seen", "VisionSide", "encode_together", "see"]

log = logging.getLogger(__name__)

# The families whose language side the slots drive: plain KV caches, everything in the input
# embeddings (and, for Qwen3-VL, its deepstack features: `deepstack.py`), M-RoPE positions (the
# Qwen-VL family, each tested on a random one: Qwen2.5-VL's windowed tower, Qwen3-VL-MoE's
# experts change nothing here) or 1D RoPE from the cache offset (LLaVA and Mistral 3, tested on
# random ones). Others (sliding windows, their own masks) decode one sequence at a time through
# mlx-vlm's own step (`serial.py`).
BATCHED = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "llava", "mistral3", *HYBRID)
# Of those, the families whose language side varies: the text configs' `model_type`s batched.
# mlx-vlm's `mistral3` holds Mistral Small 3.1/3.2 (a plain Mistral); Ministral 3's language
# side (`ministral3`: its attention scale from the first row's cache offset, sliding windows)
# and Mistral 4's (`mistral4`) stay serial.
LANGUAGES = {"mistral3": ("mistral",)}
# Of those, the families positioned by M-RoPE (`positions.py`; Qwen3-VL interleaves the three
# ids' frequencies, inside its model, from the same ids); the others' (1D RoPE) positions run on
# from each row's cache offset, as a text model's.
MROPE = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", *HYBRID)


def see(
    side: VisionSide | None, prompt: list[int], inputs: VisionInputs | None
) -> tuple[Seen | None, list[int]]:
    """A request as the worker admits it: an image request's `Seen` (None for text), and its
    prompt-cache key (a text prompt's tokens are its key)."""
    seen = side.see(prompt, inputs) if side is not None else None
    return seen, seen.key if seen is not None else prompt


@dataclass(frozen=True)
class Seen:
    """An image request as the worker admits it: its prompt-cache key, then its embeddings and
    positions (`admitted`)."""

    key: list[int]
    side: VisionSide
    prompt: list[int]
    inputs: VisionInputs

    def towered(self, cached: int) -> bool:
        """Whether its admission past `cached` tokens needs its images' encodings: an image
        lies past them, and the slots take its embeddings (`admitted`)."""
        return self.side.batched and self.side.image_token in self.prompt[cached:]

    def admitted(self, cached: int, features: mx.array | None = None) -> dict[str, Any]:
        """`Admission`'s embeddings and positions (Qwen3-VL: and deepstack features) past the
        `cached` tokens: with no image past them (the prompt cache holds them all: a
        conversation's next turn), positions alone (no tower, no embeddings: the rest is
        text). `features`: its images' encodings, when `encode_together` made them."""
        side, prompt, inputs = self.side, self.prompt, self.inputs
        if not side.batched:  # the scheduler runs mlx-vlm's own step (serial.py)
            return {"images": inputs}
        if not self.towered(cached):
            if side.family not in MROPE:
                return {}  # text past the cache, at its plain positions
            assert side.mrope is not None
            return {"positions": side.mrope.positions(prompt, inputs.image_grid_thw)}
        encoded = side.encoder.prompt(side.model, prompt, inputs, features, side.mrope)
        out: dict[str, Any] = {"embeddings": encoded.embeds[cached:]}
        out["positions"] = encoded.positions
        if encoded.deepstack is not None:  # Qwen3-VL: its image tokens' past the cached ones
            out["deepstack"] = encoded.deepstack.past(cached)
        return out


def encode_together(admitted: Sequence[tuple[Seen | None, int]]) -> list[mx.array | None]:
    """The image encodings of requests admitted together (each: its `Seen`, None for text, and
    the prompt tokens its cache holds), for `Seen.admitted`: the images of all that need them
    (`Seen.towered`) through the tower in one call (`ImageEncoder.encode`), not one call per
    request between decode steps. None for the others; for all, when that call fails (each
    then encodes its own when admitted, and fails alone)."""
    out: list[mx.array | None] = [None] * len(admitted)
    wanted = [
        (i, seen) for i, (seen, cached) in enumerate(admitted) if seen and seen.towered(cached)
    ]
    if len(wanted) < 2:
        return out  # one alone encodes as it is admitted
    side = wanted[0][1].side
    try:
        features = side.encoder.encode(side.model, [seen.inputs for _, seen in wanted])
    except Exception:  # a bad image among them: each alone, so that only its request fails
        log.warning("images admitted together failed to encode together", exc_info=True)
        return out
    for (i, _), encoded in zip(wanted, features, strict=True):
        out[i] = encoded
    return out


class VisionSide:
    """Owned by the engine thread: the model's language side, encoder and image token."""

    def __init__(self, loaded: LoadedModel, encoder: ImageEncoder) -> None:
        self.model = loaded.model
        self.family = getattr(loaded.model.config, "model_type", None)
        # Whether the slots batch its sequences (`BATCHED`); else they decode one at a time
        # through mlx-vlm's own step (`serial.py`).
        self.batched = _batched(self.family, loaded.model.config)
        self.n_tokens = len(loaded.tokenizer)
        # The batch that decodes its sequences: our slots (plain KV), mlx-lm's batch (a hybrid
        # language side: recurrent state per row, `hybrid.py`), or one at a time (`serial.py`).
        self.engine = "slots" if self.family not in HYBRID else "batch"
        if not self.batched:
            self.engine = "serial"
        self.language: VisionLanguage | HybridLanguage | None = None
        if self.engine == "slots":
            self.language = VisionLanguage(loaded.model, self.n_tokens)
        elif self.engine == "batch":
            self.language = HybridLanguage(loaded.model, self.n_tokens)
        self.encoder = encoder
        self.image_token: int = _image_token(loaded.model.config)
        # The token between an image's rows of placeholders (Pixtral's `[IMG_BREAK]`): its
        # rows are one run of its prompt-cache key (`cache_key.py`).
        joiner = getattr(getattr(loaded, "processor", None), "image_break_token_id", None)
        self.joiners = (joiner,) if isinstance(joiner, int) else ()
        # A Qwen-VL model's positions rule (`positions.MRoPE`); None for 1D RoPE.
        self.mrope = MRoPE.of(loaded.model.config) if self.family in MROPE else None
        encoder.clear()

    @classmethod
    def of(cls, loaded: LoadedModel, encoder: ImageEncoder) -> VisionSide | None:
        """The side of a vision model (an mlx-vlm one); None for a text model."""
        if not is_vision_model(loaded.model):
            return None
        return cls(loaded, encoder)

    def see(self, prompt: list[int], inputs: VisionInputs | None) -> Seen | None:
        """An image request's `Seen`; None for a text request (its tokens are its key)."""
        if inputs is None or inputs.pixel_values is None:
            return None
        key = keyed_tokens(prompt, self.image_token, inputs.image_keys, self.joiners)
        return Seen(key, self, prompt, inputs)


def _batched(family: str | None, config: Any) -> bool:
    """Whether the slots batch this model (`BATCHED`, and its language side in `LANGUAGES`)."""
    if family not in BATCHED:
        return False
    text = getattr(getattr(config, "text_config", None), "model_type", None)
    return family not in LANGUAGES or text in LANGUAGES[family]


def _image_token(config: Any) -> int:
    """The id of the image placeholder (Qwen-VL's `image_token_id`, LLaVA's and others'
    `image_token_index`); -1 where the config names none (its images key every placeholder
    together: `cache_key.py`)."""
    for name in ("image_token_id", "image_token_index"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return -1
