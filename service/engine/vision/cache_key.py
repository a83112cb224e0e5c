"""The prompt cache's key of a vision prompt: its tokens, each image's tokens standing for it.

Every image of a Qwen-VL prompt is the same placeholder token repeated (one per merged patch),
so two prompts that differ only in an image have the same tokens and different KV. The prompt
cache is keyed by tokens; the key of a vision prompt is its tokens with each image's run of
placeholders replaced by an id drawn from the image's content key (its hash and detail): a
negative int32, which no vocabulary id is, so a key can neither meet a text token nor another
image. Prompts that share an image at the same place share its key, and an image conversation's
next turn extends the key of the last one. An image laid out in rows (Pixtral's, Mistral 3's:
its rows of `[IMG]` joined by `[IMG_BREAK]`) is one run across its `joiners`. A prompt whose
placeholder runs are not one per image (a processor that expands an image otherwise) has every
placeholder stand for all its images together: it shares a key only with prompts of the same
images in the same order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

INT32 = 1 << 31


def image_id(key: str) -> int:
    """The negative int32 that stands for the image whose content key is `key`."""
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return -1 - digest % (INT32 - 1)


def keyed_tokens(
    tokens: Sequence[int],
    image_token: int,
    image_keys: Sequence[str],
    joiners: Collection[int] = (),
) -> list[int]:
    """`tokens` with the k-th run of `image_token` (one `joiners` token between two of them
    continues it) standing for the k-th image (when the runs are not one per image, each
    standing for all the images)."""
    runs = [
        i
        for i, t in enumerate(tokens)
        if t == image_token
        and not (i and tokens[i - 1] == t)
        and not (i > 1 and tokens[i - 1] in joiners and tokens[i - 2] == t)
    ]
    if len(runs) != len(image_keys):
        every = image_id("\x1f".join(image_keys))
        return [every if t == image_token else t for t in tokens]
    out = list(tokens)
    stand_in = 0
    for i, token in enumerate(out):
        if token == image_token:
            if i in runs:
                stand_in = image_id(image_keys[runs.index(i)])
            out[i] = stand_in
    return out
