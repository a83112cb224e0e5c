"""Every mlx-lm name the engine uses exists in the installed mlx-lm; a moved one fails by name.

The engine imports mlx-lm through two modules: service/engine/mlx_lm_compat.py (what the whole
engine shares) and service/engine/batch/mlx_lm_compat.py (the batch engine's names and the
internals it reads). Their imports are read from source (not by importing them), so a missing
name fails its own test even though the module itself would not import.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "service" / "engine"
COMPATS = (ENGINE / "mlx_lm_compat.py", ENGINE / "batch" / "mlx_lm_compat.py")
MODULES = (
    "mlx_responses.service.engine.mlx_lm_compat",
    "mlx_responses.service.engine.batch.mlx_lm_compat",
)


def _body() -> list[ast.stmt]:
    return [node for path in COMPATS for node in ast.parse(path.read_text()).body]


def _imports() -> list[tuple[str, str]]:
    return [
        (node.module, alias.name)
        for node in _body()
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mlx_lm")
        for alias in node.names
    ]


def _compat() -> Any:
    """The names of both compat modules, as one namespace."""
    names: dict[str, Any] = {}
    for module in MODULES:
        names.update(vars(importlib.import_module(module)))
    return type("Compat", (), names)


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [alias.name for alias in node.names]


def test_the_engine_imports_mlx_lm_only_through_the_compat_modules() -> None:
    offenders = [
        f"{path.relative_to(ENGINE)}: {node.module}"
        for path in sorted(ENGINE.rglob("*.py"))
        if path not in COMPATS
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom | ast.Import)
        for module in (
            [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        )
        if module and module.split(".")[0] == "mlx_lm"
    ]
    assert offenders == []


@pytest.mark.parametrize(("module", "name"), _imports(), ids=str)
def test_mlx_lm_exports(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{module}.{name} is gone"


def _instances() -> dict[str, Any]:
    compat = _compat()
    return {
        "BatchGenerator": compat.BatchGenerator(None),
        "GenerationBatch": compat.GenerationBatch.empty(None, None),
        "BatchKVCache": compat.BatchKVCache(left_padding=[0]),
        "KVCache": compat.KVCache(),
        "LRUPromptCache": compat.LRUPromptCache(),
        "PromptTrie": compat.PromptTrie(),
    }


def _internals() -> list[tuple[str, str]]:
    # The tables are literals in the compat module: read them from its source as well.
    tables = {
        "BATCH_GENERATOR_INTERNALS": "BatchGenerator",
        "GENERATION_BATCH_INTERNALS": "GenerationBatch",
        "BATCH_KV_CACHE_INTERNALS": "BatchKVCache",
        "KV_CACHE_INTERNALS": "KVCache",
        "PROMPT_CACHE_INTERNALS": "LRUPromptCache",
        "PROMPT_TRIE_INTERNALS": "PromptTrie",
    }
    out = []
    for node in _body():
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            owner = tables.get(node.targets[0].id)
            if owner is not None:
                out += [(owner, attr) for attr in ast.literal_eval(node.value)]
    assert len({owner for owner, _ in out}) == len(tables)
    return out


@pytest.fixture(scope="module")
def instances() -> dict[str, Any]:
    return _instances()


@pytest.mark.parametrize(("owner", "attr"), _internals(), ids=str)
def test_mlx_lm_internal(owner: str, attr: str, instances: dict[str, Any]) -> None:
    assert hasattr(instances[owner], attr), f"mlx-lm's {owner} has no {attr} any more"


def _keywords() -> list[tuple[str, str]]:
    out = []
    for node in _body():
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "KEYWORDS":
            table: dict[str, tuple[str, ...]] = ast.literal_eval(node.value)
            out += [(where, kw) for where, kws in table.items() for kw in kws or ("",)]
    assert len(out) > len(COMPATS), "KEYWORDS not found"
    return out


@pytest.mark.parametrize(("where", "keyword"), _keywords(), ids=str)
def test_mlx_lm_keyword(where: str, keyword: str) -> None:
    parts = where.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            target = getattr(target, part, None)
            assert target is not None, f"{where} is gone"
        break
    else:
        raise AssertionError(f"{where}: no such module")
    if keyword:
        assert keyword in inspect.signature(target).parameters, f"{where} takes no {keyword}="


@pytest.mark.parametrize("name", MODULES)
def test_the_compat_module_exports_what_it_lists(name: str) -> None:
    compat = importlib.import_module(name)
    assert [name for name in compat.__all__ if not hasattr(compat, name)] == []
