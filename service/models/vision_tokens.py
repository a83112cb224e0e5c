"""A vision prompt's token ids: the client's text as text, image tokens only from image parts.

The chat template renders each image part as the model's placeholder (Qwen2-VL:
`<|vision_start|><|image_pad|><|vision_end|>`). The prompt is encoded as a text prompt is
(`encode_prompt`: client text that spells a special token stays text), and each placeholder is
then replaced by the processor's expansion of its image (Qwen2-VL: one `<|image_pad|>` per 28x28
pixels). The processor never sees client text: it expands placeholders alone, so a typed
`<|im_start|>` or `<|image_pad|>` can neither forge a turn nor claim an image's tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mlx_responses.service.errors import invalid
from mlx_responses.service.text.media import public_reason
from mlx_responses.service.text.prompt import _renderer
from mlx_responses.service.text.prompt_tokens import specials_of
from mlx_responses.service.text.template_guard import template_time_limit

# The processor's arrays that are not per-token (the rest, one value per id, follow the ids).
NOT_PER_TOKEN = ("input_ids", "attention_mask", "pixel_values", "image_grid_thw")
_BEFORE, _AFTER = "\ue000before\ue000", "\ue000after\ue000"


@dataclass(frozen=True)
class Placeholder:
    """What the chat template renders for one image part: its text and its token ids."""

    text: str
    tokens: tuple[int, ...]


def image_placeholder(tokenizer: Any) -> Placeholder:
    """The template's rendering of an image part, found by rendering one between two texts.

    It must hold a special token: only then can no client text spell its ids.
    """
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": _BEFORE},
                {"type": "image"},
                {"type": "text", "text": _AFTER},
            ],
        }
    ]
    try:
        with template_time_limit():
            rendered = _renderer(tokenizer).apply_chat_template(
                messages, add_generation_prompt=False, tokenize=False
            )
    except Exception as exc:  # jinja2 raises TemplateError and arbitrary errors
        raise _unplaceable(f"its chat template refused an image part: {exc}") from exc
    start, end = rendered.find(_BEFORE), rendered.find(_AFTER)
    text = rendered[start + len(_BEFORE) : end].strip() if 0 <= start < end else ""
    if not text or not specials_of(tokenizer).spelled_in(text):
        raise _unplaceable("its chat template renders no special token for an image part")
    return Placeholder(text, tuple(tokenizer.encode(text, add_special_tokens=False)))


def _unplaceable(why: str) -> Exception:
    return invalid(
        f"This model's images cannot be placed in its prompt: {why}.", "input", "invalid_prompt"
    )


def placeholder_starts(tokens: Sequence[int], placeholder: Placeholder) -> list[int]:
    """Where each rendering of an image part starts in `tokens`, in order."""
    want = list(placeholder.tokens)
    width = len(want)
    first = want[0]
    return [
        i
        for i, token in enumerate(tokens)
        if token == first and list(tokens[i : i + width]) == want
    ]


def expand_images(
    tokens: Sequence[int],
    placeholder: Placeholder,
    processor: Any,
    pictures: Sequence[Any],
) -> tuple[list[int], dict[str, np.ndarray]]:
    """`tokens` with each image part's placeholder replaced by its image's tokens, and the
    processor's arrays for the images (per-token arrays spread over the whole prompt)."""
    starts = placeholder_starts(tokens, placeholder)
    if len(starts) > len(pictures):
        raise _spelled()
    if len(starts) < len(pictures):
        raise _unplaceable(
            f"its chat template rendered {len(starts)} image placeholders for "
            f"{len(pictures)} images"
        )
    _check_outside(tokens, starts, placeholder, processor)
    arrays = _processed(processor, placeholder.text * len(pictures), pictures)
    expanded = [int(t) for t in arrays["input_ids"][0]]
    pieces = _per_image(expanded, placeholder, processor, pictures, arrays)
    ids: list[int] = []
    # Where each id of `expanded` lands in `ids`, for the per-token arrays.
    landing: list[int] = []
    cursor = 0
    for start, piece in zip(starts, pieces, strict=True):
        ids += tokens[cursor:start]
        landing += range(len(ids), len(ids) + len(piece))
        ids += piece
        cursor = start + len(placeholder.tokens)
    ids += tokens[cursor:]
    out = {
        key: value for key, value in arrays.items() if key not in ("input_ids", "attention_mask")
    }
    for key, value in arrays.items():
        if key not in NOT_PER_TOKEN and value.ndim == 2 and value.shape == (1, len(expanded)):
            spread = np.zeros((1, len(ids)), value.dtype)
            spread[0, landing] = value[0]
            out[key] = spread
    return ids, out


def _check_outside(
    tokens: Sequence[int], starts: Sequence[int], placeholder: Placeholder, processor: Any
) -> None:
    """A 400 when an image's token ids stand outside the image parts: text whose special tokens
    stay special (instructions, replayed assistant turns) spelled one, and the model would
    look for an image there."""
    reserved = {*placeholder.tokens, getattr(processor, "image_token_id", None)}
    inside = {i for start in starts for i in range(start, start + len(placeholder.tokens))}
    if any(t in reserved and i not in inside for i, t in enumerate(tokens)):
        raise _spelled()


def _spelled() -> Exception:
    return invalid(
        "The input spells the model's image tokens outside an image part (in instructions "
        "or an assistant turn); images are sent as input_image parts.",
        "input",
        "invalid_prompt",
    )


def _processed(processor: Any, text: str, pictures: Sequence[Any]) -> dict[str, np.ndarray]:
    try:
        try:
            out = processor(
                text=[text], images=list(pictures), return_tensors="np", add_special_tokens=False
            )
        except TypeError:
            # A processor that hands every keyword to its image processor (mlx-vlm's LLaVA)
            # takes none of the tokenizer's: its tokens' leading BOS, if any, goes below.
            out = _without_bos(processor, processor(text=[text], images=list(pictures)))
    except Exception as exc:  # the processor refuses what it cannot read
        raise invalid(
            f"The model's processor refused the images: {public_reason(exc)}",
            "input",
            "invalid_image",
        ) from exc
    # Host arrays (mlx-vlm's processors may answer MLX arrays): MLX stays on its thread.
    return {key: np.array(value) for key, value in out.items()}


def _without_bos(processor: Any, out: Any) -> Any:
    """`out` with its ids' leading BOS dropped (the tokenizer's special tokens, not ours)."""
    bos = getattr(getattr(processor, "tokenizer", None), "bos_token_id", None)
    ids = np.array(out["input_ids"])
    if bos is None or not ids.shape[-1] or int(ids[0, 0]) != bos:
        return out
    return {
        key: np.array(value)[:, 1:] if key in ("input_ids", "attention_mask") else value
        for key, value in out.items()
    }


def _per_image(
    expanded: list[int],
    placeholder: Placeholder,
    processor: Any,
    pictures: Sequence[Any],
    arrays: dict[str, np.ndarray],
) -> list[list[int]]:
    """`expanded` (every placeholder's expansion, in order) cut into one piece per image."""
    if len(pictures) == 1:
        return [expanded]
    pieces = _grid_pieces(placeholder, processor, arrays) or [
        [int(t) for t in _processed(processor, placeholder.text, [p])["input_ids"][0]]
        for p in pictures
    ]
    if [t for piece in pieces for t in piece] != expanded:
        raise _unplaceable("its processor does not expand each image on its own")
    return pieces


def _grid_pieces(
    placeholder: Placeholder, processor: Any, arrays: dict[str, np.ndarray]
) -> list[list[int]] | None:
    """Qwen-VL's expansions from its grid: the image token once per merged patch (None: the
    processor is not of that kind)."""
    grid = arrays.get("image_grid_thw")
    merge = getattr(getattr(processor, "image_processor", None), "merge_size", None)
    image_id = getattr(processor, "image_token_id", None)
    if grid is None or not isinstance(merge, int) or image_id not in placeholder.tokens:
        return None
    at = placeholder.tokens.index(image_id)
    head, tail = list(placeholder.tokens[:at]), list(placeholder.tokens[at + 1 :])
    return [head + [image_id] * (int(np.prod(row)) // merge**2) + tail for row in grid]
