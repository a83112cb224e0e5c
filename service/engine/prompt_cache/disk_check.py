"""What the prompt cache's disk tier reads back, validated like a request body.

The index (`index.sqlite`) and the entry files are written by this server, but the folder
outlives it: another version, a crash mid-write, a full disk or a person may have left rows
and files this version cannot serve. Each format is checked here, in one place, before
anything is built from it: `index_row` for a row of the index, `entry_header` for an entry
file's safetensors header and `entry_layers` for the cache layout in its metadata. Each
raises `BadEntry` naming the field; the tier drops what fails (disk.py) and keeps
serving the rest.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

HASH = re.compile(r"[0-9a-f]{32}")
# An entry's file name: `<key>-<digest>.safetensors`, hex only (never a path: a row's name
# is joined to the entries folder and deleted when the row is dropped).
NAME = re.compile(r"[0-9a-f]{16,128}-[0-9a-f]{16,128}\.safetensors")
KEY = re.compile(r"[0-9a-f]{16,128}")
MAX_HEADER = 1 << 26  # bytes of a safetensors header we read (ours are a few KiB)


class BadEntry(ValueError):
    """A row or file of the disk tier that cannot be served; the message names the field."""


class Row(NamedTuple):
    """A row of the index, checked."""

    name: str
    key: str
    length: int
    digest: str
    blocks: list[str]
    trimmable: bool
    nbytes: int
    ttl: float | None
    expires: float | None


def _int(value: Any, field: str, low: int) -> int:
    if type(value) is not int or value < low:
        raise BadEntry(f"{field} must be an integer of at least {low}, not {value!r}")
    return value


def _real(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise BadEntry(f"{field} must be a finite number of seconds or null, not {value!r}")
    return float(value)


def _text(value: Any, field: str, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise BadEntry(f"{field} is not a valid {field}: {str(value)[:80]!r}")
    return value


def safe_name(value: Any) -> str | None:
    """`value` where it is a name an entry may have (its file may be deleted), else None."""
    return value if isinstance(value, str) and NAME.fullmatch(value) else None


def index_row(row: Sequence[Any], block: int) -> Row:
    """A row of `entries` (name, key, length, digest, blocks, trimmable, bytes, ttl,
    expires) as the tier uses it; BadEntry where a column is missing, of the wrong type or
    inconsistent (`block`: tokens per chained hash)."""
    if len(row) != len(Row._fields):
        raise BadEntry(f"a row of {len(row)} columns, not {len(Row._fields)}")
    name = _text(row[0], "name", NAME)
    key = _text(row[1], "key", KEY)
    length = _int(row[2], "length", 1)
    digest = _text(row[3], "digest", HASH)
    if not isinstance(row[4], str):
        raise BadEntry(f"blocks must be JSON text, not {type(row[4]).__name__}")
    try:
        blocks = json.loads(row[4])
    except ValueError as exc:
        raise BadEntry(f"blocks is not JSON: {exc}") from None
    if not isinstance(blocks, list) or not all(
        isinstance(b, str) and HASH.fullmatch(b) for b in blocks
    ):
        raise BadEntry("blocks must be a list of 32-digit hex hashes")
    if len(blocks) != length // block:
        raise BadEntry(f"blocks holds {len(blocks)} hashes for {length} tokens")
    trimmable = row[5]
    if trimmable not in (0, 1) or type(trimmable) is not int:
        raise BadEntry(f"trimmable must be 0 or 1, not {trimmable!r}")
    nbytes = _int(row[6], "bytes", 0)
    ttl, expires = _real(row[7], "ttl"), _real(row[8], "expires")
    if (ttl is None) != (expires is None):
        raise BadEntry("ttl and expires must both be set or both be null")
    return Row(name, key, length, digest, blocks, bool(trimmable), nbytes, ttl, expires)


def entry_header(
    header: Any, data_size: int, itemsizes: Mapping[str, int]
) -> tuple[dict[str, str], dict[str, tuple[str, list[int], int]]]:
    """A safetensors header (parsed JSON) checked against the data section's `data_size`
    bytes: its metadata (text values), and per tensor its dtype, shape and data offset.
    `itemsizes`: the bytes per element of each dtype the tier writes."""
    if not isinstance(header, dict):
        raise BadEntry("the header is not a JSON object")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise BadEntry("__metadata__ must map names to text")
    tensors: dict[str, tuple[str, list[int], int]] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(spec, dict):
            raise BadEntry(f"tensor {name!r}: not an object")
        dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in itemsizes:
            raise BadEntry(f"tensor {name!r}: dtype {dtype!r} is not one the tier writes")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise BadEntry(f"tensor {name!r}: shape must be a list of sizes")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_size
        ):
            raise BadEntry(f"tensor {name!r}: data_offsets outside the file's data")
        if offsets[1] - offsets[0] != math.prod(shape) * itemsizes[dtype]:
            raise BadEntry(f"tensor {name!r}: its shape does not match its bytes")
        tensors[name] = (dtype, shape, offsets[0])
    if "tokens" not in tensors or tensors["tokens"][0] != "I32" or len(tensors["tokens"][1]) != 1:
        raise BadEntry("no int32 tokens tensor")
    return meta, tensors


def entry_layers(text: str | None, classes: Collection[str], tensors: Collection[str]) -> Any:
    """The metadata's `layers` (JSON: per layer its cache class and its state's leaves, each
    a number, text, null or {"array": a tensor's name}), checked."""
    try:
        layers = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        layers = None
    if not isinstance(layers, list) or not layers:
        raise BadEntry("layers must be a non-empty JSON list")
    for layer in layers:
        if (
            not isinstance(layer, list)
            or len(layer) != 2
            or layer[0] not in classes
            or not isinstance(layer[1], list)
        ):
            raise BadEntry("each layer must be [a known cache class, its leaves]")
        for item in layer[1]:
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
                raise BadEntry("each leaf must be [its path, its value]")
            value = item[1]
            if isinstance(value, dict):
                if set(value) != {"array"} or value["array"] not in tensors:
                    raise BadEntry(f"a leaf names no tensor of the file: {value!r}")
            elif value is not None and type(value) not in (int, float, str):
                raise BadEntry(f"a leaf of type {type(value).__name__}")
    return layers
