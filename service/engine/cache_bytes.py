"""The bytes a sequence's caches hold, whatever kind each layer keeps, counted in one place.

mlx-lm's layers keep a `KVCache` (growing), a `RotatingKVCache` (a sliding window), an
`ArraysCache` (a recurrent layer's state: convolution window and SSM / linear-attention state),
a `CacheList` (a layer that keeps two, falcon_h1's attention beside its mamba), or a quantized
one (`QuantizedKVCache`, ours under `--kv-bits`). Each answers `nbytes` (an empty one: 0); only
KV caches have `keys`, so nothing may count bytes through them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def cache_nbytes(caches: Iterable[Any]) -> int:
    """The bytes `caches` (one per layer, any kind) hold."""
    return sum(int(cache.nbytes) for cache in caches)
