"""Data flows one way, between packages and between the tiers of `service/`.

`service` and `http_facade` never import each other; `launcher` composes both. Inside `service/`
each folder is one lifetime, read top to bottom as the path of a request, and imports only the
tiers below it (imports under TYPE_CHECKING count: a knot closed through them is still a knot):

    server.py, shutdown.py            the roof: the gRPC server and the process lifetime
    rpc/                              per RPC: servicers, interceptors, API keys, request ids
    core.py                           per core: composes the tiers below (the servicers' view)
    responses/                        per core: the response pipeline, history, jobs, events
    compaction/                       summarising a history
    models/                           per model: the pool, one runtime per loaded model
    text/                             the model's text protocol: no MLX
    engine/                           per token: the MLX thread only
    stores/                           beside the tiers: responses, conversations, the job board
    config.py, errors.py, metrics.py, ids.py   the ground: imported by all, importing no tier
    flags.py, envelope.py             the ground too, and standard library only

Two modules of `service` the façade may import all the same, both standard-library-only leaves,
so the façade still pulls neither the core nor MLX (tested below, statically and in a fresh
interpreter): `service/flags.py`, the one declaration of every flag of both commands, and
`service/envelope.py`, the one builder of the OpenAI error envelope every HTTP surface (the
façade and the core's metrics endpoint) answers with, and `service/limits.py`, the request limits
the core enforces and the façade's OpenAPI document states.

Inside every folder of `service/` too, no circle and no arrow back up: its files and subfolders
stand on floors, each above all it imports (tests/support/import_graph.py; the engine's folders
are held by tests/unit/test_engine_layering.py, which shows a planted one caught).

Inside `http_facade/`, the dialects (`responses/`, `chat/`, `completions/`, `anthropic/`,
`embeddings/`) are siblings over one kit (`kit/`): a dialect imports the kit and itself, never
another dialect nor the app above them; the kit imports only itself; and no file imports a
`_private` name of another. The top level holds the app and its own wiring alone.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support.import_graph import import_graph, loops
from tests.support.imports import absolute_imports

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "mlx_responses"
PACKAGES = ("service", "http_facade", "launcher")

ROOF = "roof"
GROUND = "ground"
TIERS = [
    ROOF,
    "rpc",
    "core",
    "responses",
    "compaction",
    "models",
    "text",
    "engine",
    "stores",
    GROUND,
]
TOP_FILES = {
    "server": ROOF,
    "core": "core",
    "shutdown": ROOF,
    "config": GROUND,
    "errors": GROUND,
    "metrics": GROUND,
    "ids": GROUND,
    "flags": GROUND,
    "envelope": GROUND,
    "limits": GROUND,
    "fan_out": GROUND,
    "__init__": GROUND,
}


# Modules of a forbidden package that a package may import all the same.
ALLOWED = {
    "http_facade": (
        f"{NAMESPACE}.service.flags",
        f"{NAMESPACE}.service.envelope",
        f"{NAMESPACE}.service.limits",
        f"{NAMESPACE}.service.fan_out",
    )
}
STDLIB_ONLY = (
    "service/__init__.py",
    "service/flags.py",
    "service/envelope.py",
    "service/limits.py",
    "service/fan_out.py",
)


def _allowed(package: str, name: str) -> bool:
    """`name` is an allowed module, inside one, or a package above one (`from a import flags`)."""
    return any(
        name == a or name.startswith(a + ".") or a.startswith(name + ".")
        for a in ALLOWED.get(package, ())
    )


def _imports(path: Path) -> list[str]:
    """Every absolute import of a file (function-local and TYPE_CHECKING ones included)."""
    return absolute_imports(ast.parse(path.read_text(), str(path)))


def _package(name: str) -> str | None:
    """The project package an import names (`service`, ...), or None for anything else."""
    parts = name.split(".")
    if parts[0] == NAMESPACE and len(parts) > 1 and parts[1] in PACKAGES:
        return parts[1]
    if parts[0] in (*PACKAGES, "mlx_responses_client"):
        return parts[0]
    return None


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("service", {"http_facade", "launcher", "mlx_responses_client"}),
        ("http_facade", {"service", "launcher"}),
        # The client gRPC users import stands on the generated code alone.
        ("mlx_responses_client", {"service", "http_facade", "launcher"}),
    ],
)
def test_package_does_not_import(package: str, forbidden: set[str]) -> None:
    offending = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _files(package)
        for name in _imports(path)
        if _package(name) in forbidden and not _allowed(package, name)
    )
    assert offending == []


@pytest.mark.parametrize("file", STDLIB_ONLY)
def test_the_modules_the_facade_may_import_use_the_standard_library_only(file: str) -> None:
    tops = {name.split(".")[0] for name in _imports(ROOT / file)}
    assert tops <= set(sys.stdlib_module_names) | {"__future__"}


def test_the_facade_settings_and_errors_pull_neither_the_core_nor_mlx() -> None:
    code = (
        f"import sys, {NAMESPACE}.http_facade.config, {NAMESPACE}.http_facade.kit.errors; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm') "
        f"or m.startswith('{NAMESPACE}.service')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    expected = [
        f"{NAMESPACE}.service",
        f"{NAMESPACE}.service.envelope",
        f"{NAMESPACE}.service.flags",
    ]
    assert out.strip() == str(expected)


def test_imports_use_the_installed_namespace() -> None:
    """`service.x` is `mlx_responses.service.x` everywhere: no bare top-level project names."""
    offending = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for package in (*PACKAGES, "tests", "tools", "training")
        for path in _files(package)
        for name in _imports(path)
        if name.split(".")[0] in PACKAGES
    )
    assert offending == []


def _tier_of_path(path: Path) -> str:
    rel = path.relative_to(ROOT / "service")
    if len(rel.parts) == 1:
        return TOP_FILES[rel.stem]
    return rel.parts[0]


def _tier_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[:2] != [NAMESPACE, "service"] or len(parts) < 3:
        return None
    if parts[2] in TIERS:
        return parts[2]
    return TOP_FILES.get(parts[2])


def test_every_service_file_has_a_tier() -> None:
    for path in _files("service"):
        assert _tier_of_path(path) in TIERS, path


def test_service_tiers_import_only_downwards() -> None:
    offending = []
    for path in _files("service"):
        tier = _tier_of_path(path)
        for name in _imports(path):
            target = _tier_of_module(name)
            if target is None or target == tier:
                continue
            if TIERS.index(target) <= TIERS.index(tier):
                offending.append(f"{path.relative_to(ROOT)} ({tier}) imports {name} ({target})")
    assert sorted(set(offending)) == []


def test_the_text_protocol_imports_no_mlx() -> None:
    offending = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _files("service/text")
        for name in _imports(path)
        if name.split(".")[0] in ("mlx", "mlx_lm") or _tier_of_module(name) == "engine"
    )
    assert offending == []


def test_no_circle_and_no_arrow_back_up_in_any_folder_of_the_service() -> None:
    service = ROOT / "service"
    assert loops(import_graph(service, f"{NAMESPACE}.service"), service) == []


FACADE = f"{NAMESPACE}.http_facade"
KIT = "kit"
DIALECTS = ("responses", "chat", "completions", "anthropic", "embeddings")
APP = "app"
# `http_facade/`'s top level: the app, its settings and its page (the page's files are the app's
# too); what the app mounts or serves through lives in the kit or a dialect.
APP_FILES = {"__init__", "app", "config", "page"}
FOLDERS = {KIT, *DIALECTS, "page"}


def _facade_part(parts: Sequence[str]) -> str:
    """The kit, a dialect, or the app: where a module of `http_facade` (its path parts) lies."""
    return parts[0] if parts[0] in (KIT, *DIALECTS) else APP


def facade_violations(imports: dict[str, list[str]]) -> list[str]:
    """The imports that break the façade's rule; `imports` maps each façade file (its path in
    `http_facade/`) to the absolute imports it makes."""
    found = []
    for file, names in imports.items():
        here = _facade_part(Path(file).parts)
        for name in names:
            if not name.startswith(FACADE + "."):
                continue
            parts = name.removeprefix(FACADE + ".").split(".")
            there = _facade_part(parts)
            if any(p.startswith("_") and not p.startswith("__") for p in parts):
                found.append(f"{file} imports a private name: {name}")
            elif here in DIALECTS and there in DIALECTS and there != here:
                found.append(f"{file} imports another dialect: {name}")
            elif here in DIALECTS and there == APP:
                found.append(f"{file} imports the app above it: {name}")
            elif here == KIT and there != KIT:
                found.append(f"{file} (the kit) imports {name}")
    return sorted(found)


def _facade_imports() -> dict[str, list[str]]:
    root = ROOT / "http_facade"
    return {str(path.relative_to(root)): _imports(path) for path in _files("http_facade")}


def test_facade_dialects_are_siblings_over_one_kit() -> None:
    assert facade_violations(_facade_imports()) == []


@pytest.mark.parametrize(
    ("file", "planted", "why"),
    [
        ("anthropic/to_proto.py", f"{FACADE}.chat.to_proto.template_kwargs", "another dialect"),
        ("chat/to_proto.py", f"{FACADE}.kit.decode._private_helper", "a private name"),
        ("completions/routes.py", f"{FACADE}.app.create_app", "the app above it"),
        ("kit/decode.py", f"{FACADE}.responses.to_proto.params_from_json", "(the kit) imports"),
    ],
)
def test_the_facade_rule_fails_when_an_import_is_planted(file: str, planted: str, why: str) -> None:
    imports = _facade_imports()
    assert file in imports
    imports[file] = [*imports[file], planted]
    assert facade_violations(imports) == [next(v for v in facade_violations(imports) if why in v)]


def test_the_facade_top_level_holds_the_app_the_kit_and_the_dialects() -> None:
    root = ROOT / "http_facade"
    files = {p.stem for p in root.glob("*.py")}
    folders = {p.name for p in root.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert (files - APP_FILES, folders - FOLDERS) == (set(), set())
