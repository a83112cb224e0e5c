"""Which MLX backend `make setup` installs: the project extra `cpu`, `cuda12` or `cuda`.

On Linux with an NVIDIA driver (`nvidia-smi` answers), the CUDA build matching the driver:
`cuda` (mlx[cuda13]) when the driver supports CUDA 13, `cuda12` (mlx[cuda12]) for a CUDA 12
driver; anything else (no GPU, an older driver, macOS, where mlx brings Metal itself) stays
`cpu`. `MLX_RESPONSES_BACKEND=cpu|cuda12|cuda` overrides the choice.

Prints the extra's name (and why, on stderr). Standard library only: setup runs it before the
virtual environment exists.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping

BACKENDS = ("cpu", "cuda12", "cuda")
OVERRIDE_ENV = "MLX_RESPONSES_BACKEND"
# nvidia-smi's banner: "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |"
CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*(\d+)\.(\d+)")


def cuda_version(nvidia_smi_output: str) -> tuple[int, int] | None:
    """The highest CUDA version the driver supports, from `nvidia-smi`'s banner."""
    match = CUDA_VERSION.search(nvidia_smi_output)
    return (int(match[1]), int(match[2])) if match else None


def choose(system: str, nvidia_smi_output: str | None, env: Mapping[str, str]) -> tuple[str, str]:
    """(extra, reason) for an OS name (`platform.system()`) and `nvidia-smi`'s output (None:
    not installed or failed)."""
    override = env.get(OVERRIDE_ENV, "").strip()
    if override:
        if override not in BACKENDS:
            raise ValueError(f"{OVERRIDE_ENV}={override!r}: expected one of {', '.join(BACKENDS)}")
        return override, f"{OVERRIDE_ENV}={override}"
    if system != "Linux":
        return "cpu", f"{system}: mlx brings its own backend (Metal on macOS)"
    if nvidia_smi_output is None:
        return "cpu", "no NVIDIA GPU (nvidia-smi not found or failed)"
    version = cuda_version(nvidia_smi_output)
    if version is None:
        return "cpu", "nvidia-smi names no CUDA version"
    if version[0] >= 13:
        return "cuda", f"NVIDIA driver supports CUDA {version[0]}.{version[1]}: mlx[cuda13]"
    if version[0] == 12:
        return "cuda12", f"NVIDIA driver supports CUDA {version[0]}.{version[1]}: mlx[cuda12]"
    return "cpu", f"NVIDIA driver supports only CUDA {version[0]}.{version[1]} (MLX needs 12+)"


def nvidia_smi() -> str | None:
    """`nvidia-smi`'s output, or None when there is none."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def main() -> int:
    try:
        extra, reason = choose(platform.system(), nvidia_smi(), os.environ)
    except ValueError as exc:
        print(f"setup: {exc}", file=sys.stderr)
        return 2
    print(f"setup: MLX backend {extra} ({reason})", file=sys.stderr)
    print(extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
