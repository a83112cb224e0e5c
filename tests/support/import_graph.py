"""A package's own import graph, and its loops at every level of its folders.

A file imports the files of the package its imports name (function-local and TYPE_CHECKING
ones included: a knot closed through them is still a knot). At each folder the files and
subfolders right inside it are the rooms, a subfolder standing for every file below it; an
arrow runs from one room to another where any file of the first imports any file of the
second. A loop among the rooms of one folder is a circle where the rooms are files, and an
arrow back up where one is a folder: `a.py` imports `sub/`, and a file under `sub/` imports
`a.py` (or a file that imports it), so no floor of the folder stands above all it imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

Graph = Mapping[Path, frozenset[Path]]


def modules(root: Path, prefix: str) -> dict[str, Path]:
    """Every module under `root` by its importable name (`prefix` names `root`)."""
    found: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([prefix, *parts])] = path
    return found


def _targets(tree: ast.AST, here: str, known: Mapping[str, Path]) -> set[Path]:
    """The files of `known` that `tree` (the module `here`) imports: `from m import n` is
    module `m.n` where that is one, else `m` itself."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = here.split(".")[: -node.level]
                module = ".".join([*base, module] if module else base)
            for alias in node.names:
                full = f"{module}.{alias.name}"
                names.append(full if full in known else module)
    return {known[name] for name in names if name in known}


def import_graph(root: Path, prefix: str) -> dict[Path, frozenset[Path]]:
    """Each file under `root` and the files under `root` it imports (itself left out)."""
    known = modules(root, prefix)
    graph: dict[Path, frozenset[Path]] = {}
    for name, path in known.items():
        here = f"{name}.__init__" if path.name == "__init__.py" else name
        tree = ast.parse(path.read_text(), str(path))
        graph[path] = frozenset(_targets(tree, here, known) - {path})
    return graph


def _room(folder: Path, path: Path) -> Path | None:
    """The room of `folder` that holds `path` (the file, or the subfolder it is under)."""
    try:
        rel = path.relative_to(folder)
    except ValueError:
        return None
    return folder / rel.parts[0]


def _strongly_connected(nodes: Iterable[Path], edges: Mapping[Path, set[Path]]) -> list[list[Path]]:
    """The groups of two or more nodes that reach each other (Tarjan's algorithm)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    groups: list[list[Path]] = []

    def visit(node: Path) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return groups


def loops(graph: Graph, root: Path) -> list[str]:
    """Each loop among the rooms of a folder under `root` (`root` included), with the imports
    that close it: `folder: a.py <-> sub/ (a.py -> sub/x.py; sub/y.py -> a.py)`. A package's
    `__init__.py` is its folder's face: what it hands on is drawn from the folder, not to it."""
    found: list[str] = []
    folders = sorted({root, *(p.parent for p in graph)})
    for folder in folders:
        edges: dict[Path, set[Path]] = {}
        why: dict[tuple[Path, Path], list[str]] = {}
        for source, targets in graph.items():
            if source.name == "__init__.py" and source.parent == folder:
                continue
            a = _room(folder, source)
            for target in targets:
                b = _room(folder, target)
                if a is None or b is None or a == b:
                    continue
                if target.name == "__init__.py" and target.parent == folder:
                    continue
                edges.setdefault(a, set()).add(b)
                why.setdefault((a, b), []).append(
                    f"{source.relative_to(root)} -> {target.relative_to(root)}"
                )
        for group in _strongly_connected(edges, edges):
            members = set(group)

            def name(room: Path) -> str:
                return room.relative_to(root).as_posix() + ("/" if room.is_dir() else "")

            ties = sorted(
                tie
                for (a, b), lines in why.items()
                if a in members and b in members
                for tie in lines
            )
            found.append(
                f"{name(folder) if folder != root else '.'}: "
                f"{' <-> '.join(name(room) for room in group)} ({'; '.join(ties)})"
            )
    return found
