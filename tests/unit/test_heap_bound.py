"""The C heap gives large blocks back to the system, with a memory budget or without
(memory/device.py's bound_heap; glibc only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")

# In a fresh process (mallopt is process-wide): a 4 MiB block freed, then a 2 MiB one; the
# second is mapped alone (mallinfo2's hblkhd counts it) only while the mmap threshold stays
# fixed; glibc's dynamic threshold would have risen to 4 MiB and served it from an arena.
PROBE = """
import ctypes, sys
from mlx_responses.service.engine.memory.device import process_budget

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "budget":
    process_budget(None)
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblkhd
block = libc.malloc(2 << 20)
print(libc.mallinfo2().hblkhd - before >= 2 << 20)
libc.free(block)
"""


def _mapped_alone(budget: str) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, budget], capture_output=True, text=True, check=True
    )
    return out.stdout.strip() == "True"


def test_without_a_budget_a_large_block_is_mapped_alone_after_a_larger_one_freed() -> None:
    assert not _mapped_alone("none")  # glibc's own behaviour: the probe can tell
    assert _mapped_alone("budget")  # process_budget(None): no --memory-limit
