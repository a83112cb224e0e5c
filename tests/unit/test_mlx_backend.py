"""tools/mlx_backend.py: which MLX backend `make setup` installs, from `nvidia-smi`'s banner."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tools.mlx_backend import OVERRIDE_ENV, choose, cuda_version

REPO = Path(__file__).resolve().parents[2]


def banner(driver: str, cuda: str) -> str:
    return f"""Fri Dec  4 14:20:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA H200                    On  |   00000000:19:00.0 Off |                    0 |
+-----------------------------------------+------------------------+----------------------+
"""


@pytest.mark.parametrize(
    ("driver", "cuda", "extra"),
    [
        ("580.95.05", "13.0", "cuda"),
        ("590.12", "13.1", "cuda"),
        ("550.127.05", "12.4", "cuda12"),
        ("535.54.03", "12.2", "cuda12"),
        ("470.256.02", "11.4", "cpu"),
    ],
)
def test_the_driver_s_cuda_version_picks_the_build(driver: str, cuda: str, extra: str) -> None:
    assert choose("Linux", banner(driver, cuda), {})[0] == extra


def test_no_gpu_or_not_linux_stays_on_the_cpu() -> None:
    assert choose("Linux", None, {})[0] == "cpu"
    assert choose("Linux", "NVIDIA-SMI has failed because it couldn't communicate", {})[0] == "cpu"
    assert choose("Darwin", banner("580.95.05", "13.0"), {})[0] == "cpu"


def test_the_environment_overrides_and_is_checked() -> None:
    assert choose("Linux", banner("580.95.05", "13.0"), {OVERRIDE_ENV: "cpu"})[0] == "cpu"
    assert choose("Darwin", None, {OVERRIDE_ENV: "cuda12"})[0] == "cuda12"
    with pytest.raises(ValueError, match=OVERRIDE_ENV):
        choose("Linux", None, {OVERRIDE_ENV: "rocm"})


def test_cuda_version_reads_the_banner() -> None:
    assert cuda_version(banner("580.95.05", "13.0")) == (13, 0)
    assert cuda_version("no banner") is None


def _script(tmp_path: Path, smi: str | None) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if smi is not None:
        fake = bin_dir / "nvidia-smi"
        fake.write_text(f"#!{sys.executable}\nprint({smi!r}, end='')\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if k != OVERRIDE_ENV}
    env["PATH"] = str(bin_dir)  # nothing else: no real nvidia-smi is found
    return subprocess.run(
        [sys.executable, str(REPO / "tools" / "mlx_backend.py")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )


@pytest.mark.skipif(sys.platform != "linux", reason="the CUDA choice is Linux-only")
def test_the_script_runs_nvidia_smi_from_the_path(tmp_path: Path) -> None:
    done = _script(tmp_path, banner("580.95.05", "13.0"))
    assert done.stdout == "cuda\n" and "CUDA 13.0" in done.stderr


def test_the_script_without_nvidia_smi_says_cpu(tmp_path: Path) -> None:
    assert _script(tmp_path, None).stdout == "cpu\n"
