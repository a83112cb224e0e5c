"""The prompt cache's disk tier: KV caches of long prompts kept across restarts.

Coding agents resend the same long prefix (tens of thousands of tokens) on every request; the
in-memory prompt cache (`trie.py`) serves it within one process, and this tier serves it
after a restart. The worker hands each entry it inserts into the memory cache to `put` (on the
engine thread: the arrays are evaluated there and their buffers borrowed, never copied), and a
background thread writes it; at admission, `fetch` reads an entry back where the disk holds a
longer prefix of the prompt than memory does.

Files. One safetensors file per entry (`entries/<key>-<digest>.safetensors`, readable by
`mx.load` and any safetensors reader), written to a temporary name and renamed. Its tensors are
`tokens` (int32: the entry's whole token sequence, so a hit is verified token by token) and each
cache layer's arrays, named `<layer>.<path in its state>`; its metadata holds the `format`, the
`identity` it was written for, `layers` (JSON: per layer the cache class and every leaf of its
`state`, arrays by name, numbers and None by value) and `crc32` (of the data section). A file
whose format, identity, checksum, size or tokens do not match is deleted and logged, never served.

Keys. An entry belongs to one identity: the model folder (path, and each weight, config and
tokenizer file's size and mtime), the chat template, the KV layout (`--kv-bits`), the draft model
and the prompt-cache scope (`--isolate-keys`' owner). Its digest covers its tokens.

Index. `index.sqlite` (shared by the processes using the directory) lists every entry with its
identity, token count, digest, the chained hashes of its 256-token blocks, whether its cache can
be trimmed, its bytes and last use, and, for an entry written under a client's lifetime, that
lifetime (`ttl`, seconds) and when it expires (`expires`, Unix time: its last use plus `ttl`).
The budget (`max_bytes`) holds over the whole directory, the index's own files included: before
each write the least recently used entries go until the new file fits beside the rest (an entry
that cannot fit is not written), so the folder never holds more, not even mid-write. An
expired entry is never served: it is deleted when found (at start, at a lookup); one without a
lifetime is left to the budget.

What is read back is checked before use (disk_check.py): a bad index row or entry file
is dropped (logged once, counted in `DiskHealth` and /metrics) and the rest keeps serving;
something under `entries/` that is no entry (a folder, a symlink) is never followed. A full
disk or a read-only folder pauses the writes (reported as `degraded`) while reads go on; no
failure of the tier fails a request: the prompt is prefilled from memory's answer instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import Any, cast

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten
from mlx_responses.service.engine.mlx_lm_compat import (
    can_trim_prompt_cache,
    trim_prompt_cache,
)
from mlx_responses.service.engine.model import LoadedModel
from mlx_responses.service.engine.prompt_cache.disk_check import BadEntry, index_row, safe_name
from mlx_responses.service.engine.prompt_cache.disk_io import (
    CLASSES,
    DTYPES,
    FORMAT,
    degraded_reason,
    read_entry,
    sweep,
)
from mlx_responses.service.engine.requests import DiskHealth

log = logging.getLogger(__name__)

BLOCK = 256  # tokens per chained hash
# Entries waiting for the writer; more are dropped (never block the engine). A prompt whose
# caches cannot be trimmed leaves several at once (its checkpoints: the system turn's end, where
# the generation prompt begins, its last token's and its whole prompt's, the finished turn):
# their arrays are the memory tier's, borrowed, not copies.
MAX_PENDING = 6
PAUSE = 60.0  # seconds writes stay paused after the disk was full or read-only


def model_identity(folder: Path, chat_template: str | None, layout: str, draft: Path | None) -> str:
    """What an entry must have been computed with: the weights (folder, and each file's size
    and mtime), the chat template, the KV layout and the draft model."""
    parts: list[Any] = [FORMAT, layout, chat_template or ""]
    for model in (folder, draft):
        if model is None:
            continue
        parts.append(str(model))
        for path in sorted(model.iterdir()):
            if path.suffix in (".safetensors", ".json", ".model", ".jinja"):
                stat = path.stat()
                parts.append([path.name, stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def open_disk(
    folder: Path,
    max_bytes: int,
    loaded: LoadedModel,
    layout: str,
    draft: Path | None,
    *,
    clock: Callable[[], float] = time.time,
    health: DiskHealth | None = None,
) -> PromptDisk | None:
    """The disk tier of `loaded`'s prompt cache (`layout`: its KV layout), where it is on
    (`max_bytes` > 0) and `folder` can be used; None else (logged, and `health` says
    "unavailable")."""
    if max_bytes <= 0:
        return None
    health = health if health is not None else DiskHealth()
    template = getattr(loaded.tokenizer, "chat_template", None)
    try:
        identity = model_identity(loaded.path, template, layout, draft)
        disk = PromptDisk(folder, max_bytes, identity, clock, health)
    except (OSError, sqlite3.Error) as exc:
        log.warning("prompt cache disk tier off: %s: %s", folder, exc)
        health.degraded = "unavailable"
        return None
    log.info("prompt cache disk tier in %s (%d bytes at most)", folder, max_bytes)
    return disk


def _tokens_bytes(tokens: list[int]) -> bytes:
    return np.asarray(tokens, dtype="<i4").tobytes()


def _chain(data: bytes) -> list[str]:
    """The chained hashes of each whole block of token bytes."""
    hashes: list[str] = []
    last = b""
    for start in range(0, len(data) - BLOCK * 4 + 1, BLOCK * 4):
        last = hashlib.blake2b(last + data[start : start + BLOCK * 4], digest_size=16).digest()
        hashes.append(last.hex())
    return hashes


def _digest(data: bytes, length: int, chain: list[str]) -> str:
    """The digest of the first `length` tokens (`chain`: the blocks' hashes of at least them)."""
    whole = length // BLOCK
    head = bytes.fromhex(chain[whole - 1]) if whole else b""
    tail = data[whole * BLOCK * 4 : length * 4]
    return hashlib.blake2b(head + tail + b"end", digest_size=16).hexdigest()


@dataclass
class _Entry:
    name: str  # file name
    key: str  # identity and scope
    length: int
    digest: str
    blocks: list[str]
    trimmable: bool
    nbytes: int
    ttl: float | None = None  # seconds it is kept after its last use (None: the budget's)
    expires: float | None = None  # Unix time (None: never)


@dataclass
class _Write:
    entry: _Entry
    tokens: np.ndarray
    layers: list[list[Any]]
    arrays: list[tuple[str, np.ndarray, str]]  # name, borrowed buffer, safetensors dtype
    nbytes: int  # of the borrowed arrays
    owners: list[mx.array] = field(default_factory=list)  # released on the engine thread


@dataclass
class Hit:
    """An entry the index says serves `usable` tokens of a prompt (at least)."""

    entry: _Entry
    usable: int


class PromptDisk:
    """The disk tier of one engine's prompt cache (created and called on its thread)."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        identity: str,
        clock: Callable[[], float] = time.time,
        health: DiskHealth | None = None,
    ) -> None:
        self.directory = directory
        self.health = health if health is not None else DiskHealth()
        self.clock = clock  # the lifetimes' (wall time)
        self.max_bytes = max_bytes
        self.identity = identity
        self.hits = 0  # prompts served from disk
        self.hit_tokens = 0  # prompt tokens they read from it
        self.writes = 0
        self.errors = 0  # files skipped (corrupt, truncated, foreign) and deleted
        self.read_seconds = 0.0
        self.put_seconds = 0.0  # spent handing entries over, on the engine thread
        self._paused_until = 0.0  # writes paused (disk full, read-only) until (monotonic)
        (directory / "entries").mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}  # ours (any scope), by file name
        self._pending = 0
        self._done: list[_Write] = []  # written: their borrowed arrays released here
        self._held = 0  # bytes of the arrays queued and written jobs borrow (engine thread)
        self._queue: SimpleQueue[Any] = SimpleQueue()
        with closing(self._connect()) as db:
            self._load_index(db)
        self._sweep()
        self._expire()
        self._thread = threading.Thread(target=self._write_loop, name="prompt-disk", daemon=True)
        self._thread.start()

    # --- the engine thread -------------------------------------------------------------------
    def put(
        self, scope: str, tokens: list[int], cache: list[Any], ttl: float | None = None
    ) -> bool:
        """Queues `cache` (the KV of `tokens`) for writing, kept `ttl` seconds after its last
        use (None: until the budget evicts it); False where it is not written (an unknown
        cache class, too large, or the writer behind)."""
        started = time.perf_counter()
        try:
            return self._put(scope, tokens, cache, ttl)
        finally:
            self.put_seconds += time.perf_counter() - started

    def held_bytes(self) -> int:
        """Bytes of the entries the writer holds (queued or being written): alive until
        written, whatever the memory tier keeps. Written jobs' arrays are released here (on
        the engine thread, as they were borrowed)."""
        self._reap()
        return self._held

    def _reap(self) -> None:
        with self._lock:
            done, self._done = self._done, []
        self._held -= sum(job.nbytes for job in done)

    def _put(self, scope: str, tokens: list[int], cache: list[Any], ttl: float | None) -> bool:
        self._reap()
        if len(tokens) < BLOCK or any(type(c).__name__ not in CLASSES for c in cache):
            return False
        if self.health.degraded is not None and time.monotonic() < self._paused_until:
            return False  # the disk is full or read-only: retried after the pause
        with self._lock:
            if self._pending >= MAX_PENDING:
                self.health.skipped += 1
                log.debug("prompt disk: writer busy, an entry of %d tokens skipped", len(tokens))
                return False
        layers: list[list[Any]] = []
        leaves: list[tuple[str, mx.array]] = []
        for i, c in enumerate(cache):
            items: list[list[Any]] = []
            for path, leaf in _flatten(c.state):
                if isinstance(leaf, mx.array):
                    if leaf.dtype not in DTYPES:
                        return False
                    items.append([path, {"array": f"{i}.{path}"}])
                    leaves.append((f"{i}.{path}", leaf))
                elif leaf is None or isinstance(leaf, (int, float, str)):
                    items.append([path, leaf])
                else:
                    return False
            layers.append([type(c).__name__, items])
        nbytes = sum(a.nbytes for _, a in leaves) + 4 * len(tokens)
        if nbytes > self.max_bytes:
            return False
        views = [a.view(mx.uint16) if a.dtype == mx.bfloat16 else a for _, a in leaves]
        mx.eval(views)
        arrays = [
            (name, np.asarray(memoryview(cast(Any, v))), DTYPES[a.dtype][1])
            for (name, a), v in zip(leaves, views, strict=True)
        ]
        data = _tokens_bytes(tokens)
        chain = _chain(data)
        key = self._key(scope)
        digest = _digest(data, len(tokens), chain)
        entry = _Entry(
            f"{key}-{digest}.safetensors",
            key,
            len(tokens),
            digest,
            chain,
            can_trim_prompt_cache(cache),
            nbytes,
            ttl,
            None if ttl is None else self.clock() + ttl,
        )
        with self._lock:
            self._pending += 1
        tokens_array = np.frombuffer(data, dtype="<i4")
        self._held += nbytes
        self._queue.put(_Write(entry, tokens_array, layers, arrays, nbytes, owners=views))
        return True

    def fetch(
        self, scope: str, prompt: list[int], cache: Any, rest: list[int]
    ) -> tuple[Any, list[int]]:
        """The memory cache's answer (`cache`, `rest`), or the disk's where it holds more
        (any failure of the tier: the memory's answer, logged)."""
        have = len(prompt) - len(rest) if cache is not None else 0
        if len(prompt) - have <= BLOCK:
            return cache, rest  # little left to gain
        try:
            hit = self.lookup(scope, prompt)
            if hit is None or hit.usable <= have:
                return cache, rest
            loaded = self.load(hit, prompt)
        except Exception:  # a request never fails for its disk tier
            log.exception("prompt disk: a lookup failed; the prompt is served without it")
            return cache, rest
        if loaded is None or len(prompt) - len(loaded[1]) <= have:
            return cache, rest
        return loaded

    def lookup(self, scope: str, prompt: list[int]) -> Hit | None:
        """The entry of this scope serving the most tokens of `prompt`, by the index alone (an
        expired one is deleted, never served)."""
        key = self._key(scope)
        self._expire()
        with self._lock:
            entries = [e for e in self._entries.values() if e.key == key]
        if not entries:
            return None
        data = _tokens_bytes(prompt)
        chain = _chain(data)
        best: Hit | None = None
        for e in entries:
            usable = 0
            if e.length <= len(prompt) and e.digest == _digest(data, e.length, chain):
                usable = e.length if e.length < len(prompt) or e.trimmable else 0
            elif e.trimmable:
                blocks = 0
                for mine, theirs in zip(chain, e.blocks, strict=False):
                    if mine != theirs:
                        break
                    blocks += 1
                usable = min(len(prompt) - 1, blocks * BLOCK)
            if usable > 0 and (best is None or usable > best.usable):
                best = Hit(e, usable)
        return best

    def load(self, hit: Hit, prompt: list[int]) -> tuple[list[Any], list[int]] | None:
        """The entry's cache, cut to what `prompt` shares with it, and the tokens left; None
        (the file deleted and logged) where it cannot be read or does not match."""
        started = time.perf_counter()
        path = self.directory / "entries" / hit.entry.name
        try:
            tokens, cache = read_entry(path, hit.entry.key, hit.entry.length)
            common = _common_prefix(tokens, prompt)
            if common == len(tokens) and common < len(prompt):
                rest = prompt[common:]
            elif can_trim_prompt_cache(cache) and common > 0:
                keep = min(len(prompt) - 1, common)
                trim_prompt_cache(cache, len(tokens) - keep)
                rest = prompt[keep:]
            elif common == len(tokens):  # an exact hit the worker may still trim
                rest = []
            else:
                return None
        except Exception as exc:  # any failure: never served
            self.errors += 1
            self.health.drop("file")
            log.warning("prompt disk: %s skipped and deleted: %s", path.name, exc)
            self._forget(hit.entry)
            return None
        self.hits += 1
        self.hit_tokens += len(prompt) - len(rest)
        self.read_seconds += time.perf_counter() - started
        if hit.entry.ttl is not None:  # a use: its lifetime starts again
            hit.entry.expires = self.clock() + hit.entry.ttl
        self._queue.put(("touch", hit.entry.name, hit.entry.expires))
        return cache, rest

    def flush(self, timeout: float = 30.0) -> None:
        """Waits until every queued write is on disk (tests, benchmarks)."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)

    # --- helpers -----------------------------------------------------------------------------
    def _key(self, scope: str) -> str:
        return self.identity[:32] + hashlib.sha256(scope.encode()).hexdigest()[:16]

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.directory / "index.sqlite", timeout=10)
        db.execute(
            "CREATE TABLE IF NOT EXISTS entries (name TEXT PRIMARY KEY, key TEXT, length INTEGER,"
            " digest TEXT, blocks TEXT, trimmable INTEGER, bytes INTEGER, last_use REAL,"
            " ttl REAL, expires REAL)"
        )
        columns = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
        for column in ("ttl", "expires"):  # an index written before lifetimes
            if column not in columns:
                with contextlib.suppress(sqlite3.OperationalError):  # another process's race
                    db.execute(f"ALTER TABLE entries ADD COLUMN {column} REAL")
        return db

    def _expire(self) -> None:
        """Forgets (and deletes) this identity's entries past their expiry."""
        now = self.clock()
        with self._lock:
            expired = [
                e for e in self._entries.values() if e.expires is not None and e.expires <= now
            ]
        for entry in expired:
            log.debug("prompt disk: %s expired", entry.name)
            self._forget(entry)

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            self._entries.pop(entry.name, None)
        self._queue.put(("delete", entry.name))

    def _load_index(self, db: sqlite3.Connection) -> None:
        """Reads this identity's rows; a row that fails its check (disk_check.py) is
        dropped: deleted with its file, logged, counted."""
        rows = db.execute(
            "SELECT rowid, name, key, length, digest, blocks, trimmable, bytes, ttl, expires "
            "FROM entries WHERE key LIKE ?",
            (self.identity[:32] + "%",),
        ).fetchall()
        for rowid, *columns in rows:
            try:
                entry = _Entry(*index_row(columns, BLOCK))
            except BadEntry as exc:
                log.warning("prompt disk: index row %r dropped: %s", columns[0], exc)
                self.health.drop("row")
                name = safe_name(columns[0])
                with contextlib.suppress(OSError, sqlite3.Error):  # read-only: dropped here
                    db.execute("DELETE FROM entries WHERE rowid=?", (rowid,))
                    db.commit()
                    if name is not None:
                        (self.directory / "entries" / name).unlink(missing_ok=True)
                continue
            self._entries[entry.name] = entry

    def _sweep(self) -> None:
        """Deletes files the index does not list (a write cut short), once they are old."""
        with closing(self._connect()) as db:
            listed = {row[0] for row in db.execute("SELECT name FROM entries")}
        sweep(self.directory / "entries", listed, self.health)

    # --- the writer thread -------------------------------------------------------------------
    def _write_loop(self) -> None:
        db = self._connect()
        while True:
            job = self._queue.get()
            if job is None:
                db.close()
                return
            try:
                if isinstance(job, threading.Event):
                    job.set()
                elif isinstance(job, _Write):
                    self._write(db, job)
                elif job[0] == "touch":
                    db.execute(
                        "UPDATE entries SET last_use=?, expires=? WHERE name=?",
                        (time.time(), job[2], job[1]),
                    )
                    db.commit()
                else:
                    self._delete(db, job[1])
            except Exception as exc:
                self._failed(exc)
            finally:
                if isinstance(job, _Write):
                    with self._lock:
                        self._pending -= 1
                        self._done.append(job)

    def _failed(self, exc: Exception) -> None:
        """A write, touch or delete failed: a full disk or a read-only folder pauses writes
        (reported, logged once) while reads go on; anything else is logged."""
        self.health.write_errors += 1
        reason = degraded_reason(exc)
        if isinstance(exc, BadEntry):
            log.warning("prompt disk: %s", exc)
            return
        if reason is None:
            log.error("prompt disk: a write failed", exc_info=exc)
            return
        if self.health.degraded != reason:
            log.warning("prompt disk: writes paused for %.0fs (%s): %s", PAUSE, reason, exc)
        self.health.degraded = reason
        self._paused_until = time.monotonic() + PAUSE

    def _write(self, db: sqlite3.Connection, job: _Write) -> None:
        entry = job.entry
        tensors: list[tuple[str, np.ndarray, str]] = [("tokens", job.tokens, "I32")]
        tensors += [(n, np.ascontiguousarray(a), d) for n, a, d in job.arrays]
        header: dict[str, Any] = {}
        offset = 0
        crc = 0
        for name, array, dtype in tensors:
            header[name] = {
                "dtype": dtype,
                "shape": list(array.shape),
                "data_offsets": [offset, offset + array.nbytes],
            }
            offset += array.nbytes
            crc = zlib.crc32(array.data.cast("B"), crc)
        header["__metadata__"] = {
            "format": FORMAT,
            "identity": entry.key,
            "layers": json.dumps(job.layers),
            "crc32": str(crc),
        }
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        path = self.directory / "entries" / entry.name
        if path.is_dir():
            raise BadEntry(f"{path} is a folder: the entry is not written")
        # Room first: the folder never holds more than its budget, not even while it is written.
        if not self._trim(db, room=8 + len(raw) + offset):
            log.debug("prompt disk: an entry of %d bytes does not fit the budget", offset)
            return
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            with tmp.open("wb") as f:
                f.write(len(raw).to_bytes(8, "little"))
                f.write(raw)
                for _, array, _ in tensors:
                    f.write(array.data.cast("B"))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # a part written before the disk filled
            raise
        entry.nbytes = path.stat().st_size
        db.execute(
            "INSERT OR REPLACE INTO entries (name, key, length, digest, blocks, trimmable, bytes,"
            " last_use, ttl, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.name,
                entry.key,
                entry.length,
                entry.digest,
                json.dumps(entry.blocks),
                int(entry.trimmable),
                entry.nbytes,
                time.time(),
                entry.ttl,
                entry.expires,
            ),
        )
        db.commit()
        self.writes += 1
        if self.health.degraded in ("disk_full", "read_only"):
            log.info("prompt disk: writes resumed")
            self.health.degraded = None
        with self._lock:
            self._entries[entry.name] = entry
        if entry.trimmable:  # the entries it extends only take space (as in memory)
            data = job.tokens.tobytes()
            for other in self._prefixes(entry, data):
                self._delete(db, other.name)
        self._trim(db)

    def _prefixes(self, entry: _Entry, data: bytes) -> Iterator[_Entry]:
        with self._lock:
            entries = list(self._entries.values())
        for other in entries:
            if (
                other.key == entry.key
                and other.length < entry.length
                and other.digest == _digest(data, other.length, entry.blocks)
            ):
                yield other

    def _trim(self, db: sqlite3.Connection, room: int = 0) -> bool:
        """Deletes the least recently used entries until the directory (its entries and the
        index itself) fits the budget with `room` bytes more (an entry about to be written);
        False where it cannot (nothing left to delete)."""
        total = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchone()[0]
        total = (total if isinstance(total, int) else 0) + self._index_bytes() + room
        while total > self.max_bytes:
            row = db.execute(
                "SELECT rowid, name, bytes FROM entries ORDER BY last_use LIMIT 1"
            ).fetchone()
            if row is None:
                return False
            name = safe_name(row[1])
            if name is not None:
                self._delete(db, name)
            else:  # another identity's bad row: only the row goes
                db.execute("DELETE FROM entries WHERE rowid=?", (row[0],))
                db.commit()
            total -= row[2] if type(row[2]) is int else 0
        return True

    def _index_bytes(self) -> int:
        """Bytes of the index's files (the database and its journal while one is open)."""
        held = 0
        for suffix in ("", "-journal", "-wal"):
            with contextlib.suppress(OSError):
                held += (self.directory / f"index.sqlite{suffix}").stat().st_size
        return held

    def _delete(self, db: sqlite3.Connection, name: str) -> None:
        with self._lock:
            self._entries.pop(name, None)
        path = self.directory / "entries" / name
        if not path.is_dir():  # a folder of that name is no entry of ours
            path.unlink(missing_ok=True)
        db.execute("DELETE FROM entries WHERE name=?", (name,))
        db.commit()


def _flatten(state: Any) -> list[tuple[str, Any]]:
    """A cache state's leaves by path ("0", "0.1", ...), as `tree_unflatten` takes them back."""
    return cast(list[tuple[str, Any]], tree_flatten(state))


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    x, y = np.asarray(a[:n]), np.asarray(b[:n])
    differ = np.flatnonzero(x != y)
    return int(differ[0]) if differ.size else n
