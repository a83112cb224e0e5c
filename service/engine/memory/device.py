"""The device's memory, the budget `--memory-limit` resolves to, and MLX's own limits set from it.

Policy (docs/operations.md, "Memory budget"):
- an integer (or a size: 8G, 768M) is bytes; a number below 1 is that fraction of the device's
  memory: unified memory on Apple silicon, the cgroup's limit or RAM on a CPU;
- no flag: on Metal 90% of the GPU's recommended working set (`max_recommended_working_set_size`,
  which the OS derives from its wired-memory limit, `iogpu.wired_limit_mb`: about 2/3 to 3/4 of
  RAM), so the budget stays below what the GPU may wire and the OS keeps memory for the rest of
  the machine; on a CPU none (the container's limit and the kernel decide, as before);
- with a budget, MLX's allocator is told the part of it MLX may hold (`mx.set_memory_limit`: the
  budget less what the process held beside MLX at load), its buffer cache is bounded
  (`mx.set_cache_limit`), and on Metal the wired limit is the smaller of that and the working set
  (`mx.set_wired_limit`: the weights and live KV stay resident, never more than the OS allows).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
from mlx_responses.service.engine.memory.budget import MemoryBudget

log = logging.getLogger(__name__)

METAL_DEFAULT_SHARE = 0.9  # of the recommended working set
CACHE_SHARE = 16  # MLX's buffer cache: at most 1/16 of the budget...
CACHE_MAX = 1 << 30  # ... and 1 GiB
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
HEAP_MMAP_THRESHOLD = 1 << 20  # blocks this large or larger are mapped (and unmapped) alone


def on_metal() -> bool:
    return bool(mx.metal.is_available())


def device_memory() -> int:
    """Bytes of the device's memory: unified memory on Metal, else the cgroup's limit or RAM."""
    if on_metal():
        return int(mx.device_info()["memory_size"])
    limit = _cgroup_limit()
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(limit, ram) if limit else ram


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def working_set() -> int | None:
    """The GPU's recommended working set on Metal (what it may wire); None elsewhere."""
    if not on_metal():
        return None
    return int(mx.device_info()["max_recommended_working_set_size"])


def resolve_limit(value: float | None) -> int | None:
    """The budget in bytes of `--memory-limit` (bytes, or a fraction below 1; None: the
    default: 90% of the working set on Metal, none on a CPU)."""
    if value is None:
        wired = working_set()
        return None if wired is None else int(wired * METAL_DEFAULT_SHARE)
    if value < 1:
        return int(value * device_memory())
    return int(value)


def process_bytes() -> int:
    """The process's resident memory as `ps` shows it (RSS): /proc on Linux, else `ps`."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    out = subprocess.run(
        ["ps", "-o", "rss=", "-p", str(os.getpid())], capture_output=True, text=True, check=False
    )
    return int(out.stdout.strip() or 0) * 1024


def runtime_bytes() -> int:
    """What the process holds beside MLX's arrays (interpreter, libraries, heaps): its RSS less
    MLX's active and cached bytes where RSS counts them (a CPU), else its RSS (Metal buffers
    may sit outside it)."""
    rss = process_bytes()
    held = int(mx.get_active_memory()) + int(mx.get_cache_memory())
    return rss - held if rss > held else rss


def cache_limit(limit: int) -> int:
    """The bytes of freed buffers MLX may keep for reuse under a budget of `limit`."""
    return min(limit // CACHE_SHARE, CACHE_MAX)


def bound_heap() -> None:
    """Large blocks (MLX's CPU buffers) go back to the system when freed, with a budget or
    without. glibc raises its mmap threshold to the size of each large block freed (up to 32
    MiB) and then serves such blocks from arenas it keeps once they are freed, so RSS stays at
    its high-water mark beyond what the account counts, and climbs as the arenas fragment; a
    fixed threshold also turns the dynamic one off. Measured: issue #51's burst
    (bench_memory_budget.py) peak RSS 1,034 -> 926 MiB; the soak (tests/benchmarks/soak.py,
    no budget), the arenas' free bytes 38 -> 245 MiB over 10 minutes while the bytes in use
    stayed at 165-207 MiB, RSS 292 -> 461 MiB; with the threshold fixed, 12-42 MiB free.
    Linux (glibc) only: macOS's Metal buffers are not the C heap's."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD)


def give_back_memory() -> None:
    """Hands what dropped arrays held back to the system, after a model unloads or an engine
    rebuilt its scheduler and caches: their reference cycles collected (a model's arrays sit in
    cycles of modules and closures), MLX's buffer cache emptied, the C heap's free pages
    trimmed. glibc keeps freed blocks below its mmap threshold in its arenas: MLX's CPU buffers
    of the caches dropped (a model's arrays, a failed engine's KV) would stay in the process's
    RSS. The trim is Linux only (macOS's Metal buffers are not the C heap's)."""
    gc.collect()
    mx.clear_cache()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def apply_mlx_limits(limit: int, runtime: int) -> None:
    """Sets MLX's allocator limits from the budget: memory (the budget less the runtime),
    its buffer cache, and on Metal the wired limit."""
    mlx_share = max(limit - runtime, limit // 4)
    mx.set_memory_limit(mlx_share)
    mx.set_cache_limit(cache_limit(limit))
    wired = working_set()
    if wired is not None:
        mx.set_wired_limit(min(mlx_share, wired))
    log.info(
        "memory budget %d MiB: MLX may hold %d MiB (runtime %d MiB), cache %d MiB%s",
        limit >> 20,
        mlx_share >> 20,
        runtime >> 20,
        cache_limit(limit) >> 20,
        f", wired {min(mlx_share, wired) >> 20} MiB" if wired is not None else "",
    )


def process_budget(memory_limit: float | None) -> MemoryBudget:
    """The process's budget from `--memory-limit`; MLX's limits are set once the first model
    has loaded (`MemoryBudget.open` measures the runtime then: the process beside MLX's arrays,
    and the buffer cache MLX may keep). The C heap gives large blocks back from here on."""
    bound_heap()
    limit = resolve_limit(memory_limit)
    return MemoryBudget(
        limit,
        measure_runtime=lambda: runtime_bytes() + (cache_limit(limit) if limit else 0),
        on_measured=None if limit is None else lambda runtime: apply_mlx_limits(limit, runtime),
    )
