"""The disk tier's files as read back (disk.py writes them): an entry file rebuilt
into its cache once every part of it is checked (disk_check.py), the `entries/` folder
swept of what no entry is, and what an OS error means for the tier."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from mlx.utils import tree_unflatten
from mlx_responses.service.engine.kv_quant import SequenceQuantizedKVCache
from mlx_responses.service.engine.mlx_lm_compat import (
    ArraysCache,
    CacheList,
    KVCache,
    QuantizedKVCache,
    RotatingKVCache,
)
from mlx_responses.service.engine.prompt_cache.disk_check import (
    BadEntry,
    entry_header,
    entry_layers,
)
from mlx_responses.service.engine.requests import DiskHealth

log = logging.getLogger(__name__)

FORMAT = "mlx-responses-prompt-cache/1"
# The cache classes an entry may hold: those whose state round-trips (restore equals cold):
# attention KV, plain, rotating (a sliding window) and quantized, and a recurrent model's state
# (ArraysCache: conv and SSM arrays; CacheList: several caches in one layer, falcon_h1's).
CLASSES: dict[str, type] = {
    c.__name__: c
    for c in (
        KVCache,
        RotatingKVCache,
        QuantizedKVCache,
        SequenceQuantizedKVCache,
        ArraysCache,
        CacheList,
    )
}
# numpy dtype of each MLX dtype as stored (bfloat16 travels as its uint16 bits), and its
# safetensors name.
DTYPES: dict[Any, tuple[str, str]] = {
    mx.bfloat16: ("uint16", "BF16"),
    mx.float16: ("float16", "F16"),
    mx.float32: ("float32", "F32"),
    mx.uint32: ("uint32", "U32"),
    mx.int32: ("int32", "I32"),
    mx.int64: ("int64", "I64"),  # longcat_flash_ngram's context of token ids
    mx.uint8: ("uint8", "U8"),
}
_NAMES = {name: np_name for np_name, name in DTYPES.values()}
_ITEMSIZES = {name: np.dtype(np_name).itemsize for name, np_name in _NAMES.items()}


def read_entry(path: Path, key: str, length: int) -> tuple[list[int], list[Any]]:
    """The tokens and cache of the entry file at `path`, written under `key` for `length`
    tokens; BadEntry (or OSError) where any part of it does not hold."""
    if path.is_symlink():
        raise BadEntry("a symlink, not an entry file")
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size < 1 << 26:
            raise BadEntry("not a safetensors file")
        try:
            parsed = json.loads(f.read(size))
        except ValueError as exc:
            raise BadEntry(f"its header is not JSON: {exc}") from None
        data = bytearray(max(0, os.fstat(f.fileno()).st_size - 8 - size))
        if f.readinto(data) != len(data) or len(data) == 0:
            raise BadEntry("truncated")
    meta, tensors = entry_header(parsed, len(data), _ITEMSIZES)
    if meta.get("format") != FORMAT or meta.get("identity") != key:
        raise BadEntry("written for another model, template or KV layout")
    if meta.get("crc32") != str(zlib.crc32(data)):
        raise BadEntry("checksum mismatch")
    arrays: dict[str, Any] = {}
    for name, (dtype, shape, start) in tensors.items():
        flat = np.frombuffer(data, dtype=_NAMES[dtype], count=math.prod(shape), offset=start)
        arrays[name] = flat.reshape(shape)
    tokens: list[int] = arrays.pop("tokens").tolist()
    if len(tokens) != length:
        raise BadEntry("token count mismatch")
    cache = []
    for cls_name, items in entry_layers(meta.get("layers"), CLASSES, arrays):
        leaves = [(leaf_path, _leaf(value, arrays, tensors)) for leaf_path, value in items]
        cache.append(CLASSES[cls_name].from_state(tree_unflatten(leaves)))  # type: ignore[attr-defined]
    mx.eval([c.state for c in cache])
    return tokens, cache


def _leaf(value: Any, arrays: dict[str, np.ndarray], tensors: dict[str, Any]) -> Any:
    """A state leaf as read back: an array (by its tensor's name) or the value itself."""
    if not isinstance(value, dict):
        return value
    leaf = mx.array(arrays[value["array"]])
    return leaf.view(mx.bfloat16) if tensors[value["array"]][0] == "BF16" else leaf


def sweep(entries: Path, listed: set[str], health: DiskHealth) -> None:
    """Deletes files of `entries` the index does not list (a write cut short) once they are
    old; a symlink is removed (never followed), a folder left alone, each counted as junk.
    A listed name is checked when it is read."""
    cutoff = time.time() - 3600
    with os.scandir(entries) as found:
        for item in found:
            if item.name in listed:
                continue
            try:
                if item.is_symlink() or item.is_dir(follow_symlinks=False):
                    log.warning("prompt disk: %s is no entry; ignored", item.path)
                    health.drop("junk")
                    if item.is_symlink():
                        os.unlink(item.path)
                elif item.stat().st_mtime < cutoff:
                    os.unlink(item.path)
            except OSError as exc:  # gone meanwhile, or a read-only folder
                log.debug("prompt disk: sweep left %s: %s", item.path, exc)


def degraded_reason(exc: Exception) -> str | None:
    """Why `exc` pauses the writes: "disk_full", "read_only", or None (another failure)."""
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return "disk_full"
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return "read_only"
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL:
            return "disk_full"
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
            return "read_only"
    return None
