"""Log lines: JSON objects with the request id; the core's metrics port is range-checked."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from mlx_responses.http_facade.kit import request_id as http_request_id
from mlx_responses.launcher.logs import JsonFormatter, RequestIdFilter
from mlx_responses.service.config import ConfigError, Settings
from mlx_responses.service.rpc import request_id as rpc_request_id


def _record(message: str = "hello %s", args: tuple[object, ...] = ("world",)) -> logging.LogRecord:
    return logging.LogRecord(
        "mlx_responses.service.x", logging.INFO, __file__, 1, message, args, None
    )


def test_json_line_carries_the_request_id_of_either_side() -> None:
    formatter, stamp = JsonFormatter(), RequestIdFilter()
    token = http_request_id.REQUEST_ID.set("req_a")
    try:
        record = _record()
        assert stamp.filter(record)
        line = json.loads(formatter.format(record))
    finally:
        http_request_id.REQUEST_ID.reset(token)
    assert line["message"] == "hello world"
    assert line["level"] == "INFO"
    assert line["logger"] == "mlx_responses.service.x"
    assert line["request_id"] == "req_a"
    assert line["time"].endswith("Z")
    token = rpc_request_id.REQUEST_ID.set("rpc_b")
    try:
        record = _record()
        stamp.filter(record)
    finally:
        rpc_request_id.REQUEST_ID.reset(token)
    assert json.loads(formatter.format(record))["request_id"] == "rpc_b"
    plain = _record()
    stamp.filter(plain)
    assert "request_id" not in json.loads(formatter.format(plain))


def test_json_line_carries_the_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed", (), exc_info=sys.exc_info()
        )
    line = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in line["exception"]


@pytest.mark.parametrize("port", [-1, 65536])
def test_metrics_port_out_of_range(port: int) -> None:
    with pytest.raises(ConfigError, match="--metrics-port"):
        Settings(metrics_port=port)
