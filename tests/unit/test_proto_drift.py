"""The committed generated code matches the protos (regenerate with `make proto`)."""

from __future__ import annotations

from pathlib import Path

from tools.genproto import ROOT, generate


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    committed = sorted(
        p
        for p in (ROOT / "mlx_responses").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert [p.relative_to(tmp_path) for p in fresh] == [p.relative_to(ROOT) for p in committed]
    for new in fresh:
        old = ROOT / new.relative_to(tmp_path)
        assert new.read_text() == old.read_text(), f"{old} is stale: run `make proto`"
