"""What a Python file imports, read from its syntax tree (the layering tests' one reader)."""

from __future__ import annotations

import ast


def absolute_imports(tree: ast.AST) -> list[str]:
    """Every absolute import in `tree` (function-local and TYPE_CHECKING ones included): each
    module, and each name imported from one as `module.name`."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names
