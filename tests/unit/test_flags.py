"""One declaration per flag (service/flags.py): parsers, settings and the docs page agree."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest
from mlx_responses.http_facade.config import FacadeSettings
from mlx_responses.launcher.cli import build_parser
from mlx_responses.service import flags
from mlx_responses.service.config import Settings

from tools.gen_docs import DOCS, FLAGS_PAGE, render_flags_page, stale_pages

ARGV = {"serve": ["serve"], "core": ["core"], "facade": ["facade", "--core", "h:1"]}


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


@pytest.mark.parametrize("command", flags.COMMANDS)
def test_each_command_takes_exactly_its_declared_flags_once(command: str) -> None:
    declared = sorted(str(s.flag) for s in flags.FLAGS if s.flag and command in s.commands)
    options = [
        o
        for a in _subparser(command)._actions
        for o in a.option_strings
        if o not in ("-h", "--help")
    ]
    assert sorted(options) == declared


@pytest.mark.parametrize("command", flags.COMMANDS)
def test_parsed_defaults_are_the_declared_defaults(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for spec in flags.FLAGS:
        if spec.env:
            monkeypatch.delenv(spec.env, raising=False)
    args = build_parser().parse_args(ARGV[command])
    for spec in flags.FLAGS:
        if spec.flag and command in spec.commands and not spec.required:
            assert getattr(args, spec.field) == spec.default, spec.flag


def test_settings_defaults_are_the_declared_defaults() -> None:
    for settings in (Settings(), FacadeSettings()):
        for f in fields(settings):
            spec = next((s for s in flags.FLAGS if s.field == f.name), None)
            if spec is not None and spec.default is not None and spec.action != "append":
                assert getattr(settings, f.name) == spec.default, f.name


def test_every_variable_is_read_with_the_flag_type() -> None:
    assert flags.env_value(flags.GRPC_PORT, {}) == 50051
    assert flags.env_value(flags.STORE_URL, {"MLX_RESPONSES_STORE_URL": "redis://h:1/0"}) == (
        "redis://h:1/0"
    )
    assert flags.env_value(flags.STORE_URL, {"MLX_RESPONSES_STORE_URL": ""}) == "memory"
    with pytest.raises(flags.EnvValueError, match="MLXCEL_REASONING_ECHO_MAX_BYTES"):
        flags.env_value(flags.REASONING_ECHO_MAX_BYTES, {"MLXCEL_REASONING_ECHO_MAX_BYTES": "x"})


def test_help_shows_default_and_variable() -> None:
    text = flags.RESPONSES_STORE_MAX_BYTES.help_text()
    assert text.endswith("(default 268435456; env MLXCEL_RESPONSES_STORE_MAX_BYTES)")
    assert _subparser("core").format_help().count("--responses-store-max-bytes") >= 1


def test_the_generated_flags_page_is_fresh() -> None:
    assert stale_pages() == [], "run `python -m tools.gen_docs`"
    page = (DOCS / FLAGS_PAGE).read_text()
    for spec in flags.FLAGS:
        assert f"`{spec.flag or spec.env}`" in page


def test_a_changed_declaration_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = flags.Flag("--port", "port", 8081, "HTTP port", flags.FACADE_SIDE, type=int)
    monkeypatch.setattr(
        flags, "FLAGS", tuple(changed if s is flags.PORT else s for s in flags.FLAGS)
    )
    import tools.gen_docs

    monkeypatch.setattr(tools.gen_docs, "FLAGS", flags.FLAGS)
    assert "8081" in render_flags_page()
    assert stale_pages() == [FLAGS_PAGE]
