"""API key, TLS and body-limit flags; the exposure warnings; constant-time key checks."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mlx_responses.http_facade.config import (
    FacadeConfigError,
    FacadeSettings,
    facade_settings_from_args,
)
from mlx_responses.http_facade.kit import auth as facade_auth
from mlx_responses.launcher.cli import build_parser
from mlx_responses.launcher.exposure import is_loopback, warn_if_exposed
from mlx_responses.service.config import ConfigError, Settings, settings_from_args
from mlx_responses.service.rpc import auth as core_auth


def test_serve_takes_keys_from_flags_and_env_for_both_sides() -> None:
    args = build_parser().parse_args(["serve", "--api-key", "a", "--api-key", "b"])
    env = {"MLX_RESPONSES_API_KEY": " c, b ,,d "}
    assert settings_from_args(args, env).api_keys == ("a", "b", "c", "d")
    assert facade_settings_from_args(args, env).api_keys == ("a", "b", "c", "d")


def test_keys_stay_out_of_reprs() -> None:
    assert "s3cret" not in repr(Settings(api_keys=("s3cret",)))
    assert "s3cret" not in repr(FacadeSettings(api_keys=("s3cret",)))


def test_bad_access_settings_fail_startup() -> None:
    with pytest.raises(ConfigError, match="go together"):
        Settings(grpc_tls_cert=Path("c.pem"))
    with pytest.raises(FacadeConfigError, match="max-request-bytes"):
        FacadeSettings(max_request_bytes=0)
    with pytest.raises(FacadeConfigError, match="max-request-bytes"):
        FacadeSettings(max_request_bytes=2**40)
    args = build_parser().parse_args(["facade", "--core", "h:1", "--max-request-bytes", "4096"])
    assert facade_settings_from_args(args, {}).max_request_bytes == 4096


@pytest.mark.parametrize("module", [facade_auth, core_auth])
def test_key_matching(module: object) -> None:
    matches = module.key_matches  # type: ignore[attr-defined]
    assert matches("k2", ["k1", "k2"])
    assert not matches("k", ["k1", "k2"])
    assert not matches("k1 ", ["k1"])
    assert not matches("", ["k1"])


def test_bearer_parsing() -> None:
    assert facade_auth.bearer_token("Bearer  abc ") == "abc"
    assert facade_auth.bearer_token("bearer abc") == "abc"
    assert facade_auth.bearer_token("Basic abc") is None
    assert facade_auth.bearer_token("Bearer ünï") is None  # cannot travel as gRPC metadata
    assert facade_auth.bearer_token(None) is None
    assert core_auth.bearer_token([("authorization", "Bearer xyz")]) == "xyz"
    assert core_auth.bearer_token([("authorization", "xyz")]) is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("example.org", False)],
)  # fmt: skip
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_warnings_when_exposed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mlx_responses"):
        warn_if_exposed("the gRPC core", "127.0.0.1", has_key=False, has_tls=False)
        assert caplog.records == []
        warn_if_exposed("the HTTP façade", "0.0.0.0", has_key=False)
        warn_if_exposed("the gRPC core", "0.0.0.0", has_key=True, has_tls=False)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "without an API key" in messages[0] and "0.0.0.0" in messages[0]
    assert "without TLS" in messages[1]
