"""The architecture table of docs/concepts/architecture.md is the zoo's (tools/zoo_table.py)."""

from __future__ import annotations

from tools.zoo_table import PAGE, table, with_table


def test_the_table_is_fresh() -> None:
    page = PAGE.read_text()
    assert with_table(page, table()) == page, "run `python -m tools.zoo_table`"
