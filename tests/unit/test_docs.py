"""The docs site builds strictly, fails on a broken link or a stale generated page; README's links
and the repository paths the docs name resolve."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

from tools.gen_docs import DOCS, FLAGS_PAGE, ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
REPO_PATH = re.compile(
    r"`((?:service|http_facade|launcher|tests|tools|proto|training|contract|mlx_responses_client)"
    r"/[^`\s]*)`"
)


def _build(docs: Path, site: Path) -> None:
    build(load_config(str(ROOT / "mkdocs.yml"), docs_dir=str(docs), site_dir=str(site)))


def _copy_docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    return docs


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    _build(DOCS, tmp_path / "site")
    assert (tmp_path / "site" / "reference" / "flags" / "index.html").exists()


@pytest.mark.parametrize(
    "broken", ["[x](nowhere.md)", "[x](concepts/architecture.md#no-such-heading)"]
)
def test_a_broken_link_fails_the_strict_build(tmp_path: Path, broken: str) -> None:
    docs = _copy_docs(tmp_path)
    with (docs / "index.md").open("a") as page:
        page.write(f"\n{broken}\n")
    with pytest.raises(Abort):
        _build(docs, tmp_path / "site")


def test_a_stale_flags_page_fails_the_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    docs = _copy_docs(tmp_path)
    page = docs / FLAGS_PAGE
    page.write_text(page.read_text().replace("| 8080 |", "| 8081 |"))
    with pytest.raises(Abort, match="BuildError"):
        _build(docs, tmp_path / "site")
    assert "stale" in caplog.text and str(FLAGS_PAGE) in caplog.text


def test_a_stale_grpc_status_table_fails_the_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The table in docs/api/grpc.md is generated from service/errors.py and the façade's."""
    docs = _copy_docs(tmp_path)
    page = docs / "api" / "grpc.md"
    row = "| `NOT_FOUND` | `NOT_FOUND` (5) | 404,"
    assert row in page.read_text()
    page.write_text(page.read_text().replace(row, "| `NOT_FOUND` | `NOT_FOUND` (5) | 400,"))
    with pytest.raises(Abort, match="BuildError"):
        _build(docs, tmp_path / "site")
    assert "stale" in caplog.text and "api/grpc.md" in caplog.text


def test_the_readme_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = [t for t in LINK.findall(readme) if not t.startswith(("http://", "https://"))]
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert missing == []


def test_the_docs_name_only_files_that_exist() -> None:
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    missing = sorted(
        f"{page.relative_to(ROOT)}: {path}"
        for page in pages
        for path in REPO_PATH.findall(page.read_text())
        if not (ROOT / path.split("::")[0].rstrip("/")).exists()
    )
    assert missing == []


def test_every_readme_section_kept_a_home() -> None:
    """The README links each docs page (the docs hold what the README no longer says)."""
    readme = (ROOT / "README.md").read_text()
    pages = sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md"))
    assert [p for p in pages if p not in readme] == []


def test_every_docs_page_is_listed_in_the_index() -> None:
    """A page nobody links from docs/index.md is a page nobody finds."""
    index = (DOCS / "index.md").read_text()
    linked = {(DOCS / m).resolve() for m in re.findall(r"\]\(([^)#\s]+\.md)", index)}
    pages = {p.resolve() for p in DOCS.rglob("*.md") if p != DOCS / "index.md"}
    missing = sorted(str(p.relative_to(DOCS)) for p in pages - linked)
    assert not missing, f"docs/index.md does not list: {missing}"


def _pages_linked(text: str, base: Path) -> set[Path]:
    """The docs pages `text` (a page under `base`) links to, resolved."""
    return {
        (base / target).resolve()
        for target in re.findall(r"\]\(([^)#\s]+\.md)", text)
        if not target.startswith(("http://", "https://"))
    }


def test_the_index_lists_what_the_readme_lists() -> None:
    """The README's list of the docs and docs/index.md name the same pages (each but itself)."""
    readme = _pages_linked((ROOT / "README.md").read_text(), ROOT)
    index = _pages_linked((DOCS / "index.md").read_text(), DOCS)
    home = (DOCS / "index.md").resolve()
    in_readme_only = sorted(str(p.relative_to(ROOT)) for p in readme - index - {home})
    in_index_only = sorted(str(p.relative_to(ROOT)) for p in index - readme)
    assert (in_readme_only, in_index_only) == ([], [])
