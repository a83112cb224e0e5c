"""The engine's own tiers (`service/engine/`), beside tests/unit/test_layering.py.

    worker.py, vision_worker.py       drive a scheduler through `scheduler.Scheduler` alone
    schedulers.py                     the one module that builds them: imports every package
    batch/  slots/  solo/             the schedulers: none imports another
    scheduler.py, kv_quant.py, ...    what they stand on: imports no scheduler package

mlx-lm's private names (a `._x` attribute that mlx-lm's own classes define, an import of a
`_`-prefixed mlx-lm name) are read under `batch/` only, each listed in
`batch/mlx_lm_compat.py`'s tables; the one exception is the prompt cache's trie
(`prompt_cache/trie.py`, mlx-lm's LRUPromptCache indexed, and `prompt_cache/expiry.py` over
it), whose names are listed in `engine/mlx_lm_compat.py`.

A class is one file, split by responsibility, never by length: no class declares private
attributes it does not set (a mixin's view of its host's state: a Protocol of `_x` members, a
bare `_x: T` in a class body none of its methods assigns).

No circle and no arrow back up, at any level of the engine's folders
(tests/support/import_graph.py): the files and subfolders of each folder stand on floors, each
above all it imports (the data the protocol carries, `image_prompt.py`, below the seam; the
lockstep link typed against `distributed/link.py`'s protocols, not the worker).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tests.support.import_graph import import_graph, loops
from tests.support.imports import absolute_imports

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "service" / "engine"
PREFIX = "mlx_responses.service.engine"
SCHEDULERS = ("batch", "slots", "solo")
COMPOSERS = ("schedulers.py",)  # may import every scheduler package
# Files outside batch/ allowed mlx-lm private names, and the table (in engine/mlx_lm_compat.py)
# that lists them.
PRIVATE_OUTSIDE_BATCH = {
    "prompt_cache/trie.py": ("PROMPT_CACHE_INTERNALS", "PROMPT_TRIE_INTERNALS"),
    "prompt_cache/expiry.py": ("PROMPT_CACHE_INTERNALS", "PROMPT_TRIE_INTERNALS"),
}


def _files() -> list[Path]:
    return sorted(ENGINE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ENGINE).as_posix()


def _package(path: Path) -> str | None:
    """The scheduler package a file is in (None: the engine's shared modules)."""
    parts = path.relative_to(ENGINE).parts
    return parts[0] if len(parts) > 1 and parts[0] in SCHEDULERS else None


def _scheduler_imported(name: str) -> str | None:
    parts = name.split(".")
    base = PREFIX.split(".")
    if parts[: len(base)] == base and len(parts) > len(base) and parts[len(base)] in SCHEDULERS:
        return parts[len(base)]
    return None


def scheduler_imports(path: Path, tree: ast.AST) -> list[str]:
    """The imports of `path` that break the tiers: a scheduler package importing another, a
    shared module importing any (but the composer)."""
    own = _package(path)
    if own is None and _rel(path) in COMPOSERS:
        return []
    return sorted(
        {
            f"{_rel(path)} imports {name}"
            for name in absolute_imports(tree)
            if (target := _scheduler_imported(name)) is not None and target != own
        }
    )


def mlx_lm_private_names() -> frozenset[str]:
    """`_x` names mlx-lm's classes define: methods, and attributes set on `self`."""
    spec = importlib.util.find_spec("mlx_lm")
    assert spec is not None and spec.origin is not None
    names: set[str] = set()
    for source in Path(spec.origin).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ClassDef):
                names.update(
                    item.name
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                )
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def private_reads(tree: ast.AST, private: frozenset[str]) -> set[str]:
    """mlx-lm private names a file reads: `x._name` for a name mlx-lm defines and the file does
    not (its own methods, its own attributes set on `self`), and `_`-prefixed mlx-lm imports."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            own.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            own.add(node.attr)
    found = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in private and node.attr not in own
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mlx_lm":
            found |= {a.name for a in node.names if a.name.startswith("_")}
    return found


def _listed(compat: Path, tables: tuple[str, ...] | None = None) -> set[str]:
    """The names listed in a compat module's `*_INTERNALS` tables (those of `tables`)."""
    names: set[str] = set()
    for node in ast.parse(compat.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            table = node.targets[0].id
            if table.endswith("_INTERNALS") and (tables is None or table in tables):
                names |= set(ast.literal_eval(node.value))
    return names


def private_offences(path: Path, tree: ast.AST, private: frozenset[str]) -> list[str]:
    """mlx-lm private names `path` reads that it may not: any outside batch/ (but the listed
    exceptions), any under batch/ that `batch/mlx_lm_compat.py` does not list."""
    if _package(path) == "batch":
        allowed = _listed(ENGINE / "batch" / "mlx_lm_compat.py")
    elif (tables := PRIVATE_OUTSIDE_BATCH.get(_rel(path))) is not None:
        allowed = _listed(ENGINE / "mlx_lm_compat.py", tables)
    else:
        allowed = set()
    return sorted(f"{_rel(path)} reads {name}" for name in private_reads(tree, private) - allowed)


@pytest.fixture(scope="module")
def private() -> frozenset[str]:
    return mlx_lm_private_names()


def test_the_scheduler_packages_exist() -> None:
    for name in SCHEDULERS:
        assert (ENGINE / name / "__init__.py").is_file(), name


def test_no_scheduler_imports_another_and_what_they_share_imports_none() -> None:
    offending = [
        line for path in _files() for line in scheduler_imports(path, ast.parse(path.read_text()))
    ]
    assert offending == []


def test_mlx_lm_private_names_are_read_under_batch_only_and_listed(
    private: frozenset[str],
) -> None:
    assert {"_generation_batch", "_prompt_batch", "_next_tokens", "_idx"} <= private
    offending = [
        line
        for path in _files()
        for line in private_offences(path, ast.parse(path.read_text()), private)
    ]
    assert offending == []


def test_no_circle_and_no_arrow_back_up_in_the_engine() -> None:
    assert loops(import_graph(ENGINE, PREFIX), ENGINE) == []


def host_declarations(tree: ast.AST) -> list[str]:
    """The private attributes each class of `tree` declares without setting them: a
    Protocol's `_x` members, and, outside a dataclass (whose fields are its own), a bare
    `_x: T` in its body that none of its methods assigns (`self._x = ...`)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
        decorators = {ast.unparse(d).split("(")[0].rsplit(".", 1)[-1] for d in node.decorator_list}
        set_here = {
            n.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        }
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                name, bare = item.name, False
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                name, bare = item.target.id, item.value is None
            else:
                continue
            if not name.startswith("_") or name.startswith("__"):
                continue
            if "Protocol" in bases or (
                bare and "dataclass" not in decorators and name not in set_here
            ):
                found.append(f"{node.name}.{name}")
    return found


def test_no_class_declares_its_hosts_private_attributes() -> None:
    offending = [
        f"{_rel(path)}: {name}"
        for path in _files()
        for name in host_declarations(ast.parse(path.read_text()))
    ]
    assert offending == []


# --- the checks catch what they are for --------------------------------------------------


def _fake(rel: str, source: str) -> tuple[Path, ast.AST]:
    return ENGINE / rel, ast.parse(source)


def test_a_scheduler_importing_another_is_caught() -> None:
    path, tree = _fake(
        "slots/x.py", "from mlx_responses.service.engine.batch.scheduler import BatchScheduler\n"
    )
    assert scheduler_imports(path, tree) == [
        "slots/x.py imports mlx_responses.service.engine.batch.scheduler",
        "slots/x.py imports mlx_responses.service.engine.batch.scheduler.BatchScheduler",
    ]
    # A function-local import counts; a shared module importing a package does too.
    path, tree = _fake(
        "kv_quant.py", "def f():\n    from mlx_responses.service.engine import solo\n"
    )
    assert scheduler_imports(path, tree) == [
        "kv_quant.py imports mlx_responses.service.engine.solo"
    ]
    # Its own package and the composer are fine.
    path, tree = _fake("slots/x.py", "from mlx_responses.service.engine.slots.store import Store\n")
    assert scheduler_imports(path, tree) == []
    path, tree = _fake("schedulers.py", "from mlx_responses.service.engine.batch import x\n")
    assert scheduler_imports(path, tree) == []


def test_a_private_mlx_lm_read_outside_batch_or_unlisted_is_caught(
    private: frozenset[str],
) -> None:
    path, tree = _fake("slots/x.py", "def f(g):\n    return len(g._prompt_batch)\n")
    assert private_offences(path, tree, private) == ["slots/x.py reads _prompt_batch"]
    path, tree = _fake("worker.py", "from mlx_lm.generate import _left_pad_prompts\n")
    assert private_offences(path, tree, private) == ["worker.py reads _left_pad_prompts"]
    # Under batch/: listed names pass, an unlisted one does not.
    path, tree = _fake("batch/x.py", "def f(g):\n    return g._prompt_batch, g._stream\n")
    assert private_offences(path, tree, private) == ["batch/x.py reads _stream"]
    # A file's own private attributes are its own, whatever mlx-lm calls its.
    path, tree = _fake("slots/x.py", "class A:\n    def f(self):\n        self._stream = 1\n")
    assert private_offences(path, tree, private) == []


def test_a_planted_circle_or_arrow_back_up_in_the_engine_is_caught() -> None:
    graph = dict(import_graph(ENGINE, PREFIX))
    seam, below = ENGINE / "scheduler.py", ENGINE / "image_prompt.py"
    assert below in graph[seam]
    # The seam importing the vision side again: vision/ imports scheduler.py, an arrow back up.
    planted = {**graph, seam: graph[seam] | {ENGINE / "vision" / "positions.py"}}
    (found,) = loops(planted, ENGINE)
    assert found.startswith(".: scheduler.py <-> vision/ (scheduler.py -> vision/positions.py; ")
    # The data below the seam importing the seam: a circle of two files.
    planted = {**graph, below: graph[below] | {seam}}
    assert loops(planted, ENGINE) == [
        ".: image_prompt.py <-> scheduler.py "
        "(image_prompt.py -> scheduler.py; scheduler.py -> image_prompt.py)"
    ]


def test_the_loops_are_read_from_the_files_imports(tmp_path: Path) -> None:
    """On disk: a circle inside a subfolder, an arrow back up into it, function-local and
    TYPE_CHECKING imports counted, a package's face not."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "top.py": "from pkg.sub import a\n",
        "ground.py": "",
        "sub/__init__.py": "from pkg.sub.a import A\n",
        "sub/a.py": "from pkg import ground\nA = 1\ndef f():\n    from pkg.sub import b\n",
        "sub/b.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.sub.a import A\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    graph = import_graph(root, "pkg")
    assert loops(graph, root) == [
        "sub/: sub/a.py <-> sub/b.py (sub/a.py -> sub/b.py; sub/b.py -> sub/a.py)"
    ]
    (root / "sub" / "b.py").write_text("from pkg.top import x\n")
    assert loops(import_graph(root, "pkg"), root) == [
        ".: sub/ <-> top.py (sub/b.py -> top.py; top.py -> sub/a.py)"
    ]


def test_a_mixin_declaring_its_hosts_state_is_caught() -> None:
    _, tree = _fake(
        "warm_up.py",
        "class _Engine(Protocol):\n    _commands: Any\n    def _new_cache(self) -> Any: ...\n"
        "class Mixin:\n    _stores: list\n    _own: int\n"
        "    def f(self) -> None:\n        self._own = 1\n"
        "@dataclass\nclass Fields:\n    _x: int\n",
    )
    assert host_declarations(tree) == ["_Engine._commands", "_Engine._new_cache", "Mixin._stores"]
