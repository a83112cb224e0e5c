"""What a client controls cannot forge a log line: control characters are escaped in text logs."""

from __future__ import annotations

import io
import json
import logging

import httpx
from mlx_responses.launcher.logs import TEXT_FORMAT, JsonFormatter, RequestIdFilter, _TextFormatter

from tests.support.stack import Stack

FORGED = "%0d%0a2026-01-01 00:00:00,000 INFO admin [-]: root logged in%00%1b[31m"


def _capture(formatter: logging.Formatter) -> tuple[logging.Handler, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(formatter)
    return handler, out


def test_a_crlf_in_the_path_stays_on_its_access_line(stack: Stack) -> None:
    access = logging.getLogger("mlx_responses.http_facade.access")
    handler, out = _capture(_TextFormatter(TEXT_FORMAT))
    access.addHandler(handler)
    previous = access.level
    access.setLevel(logging.INFO)
    try:
        reply = httpx.get(f"{stack.base_url}/v1/responses/resp_{FORGED}", timeout=30)
        assert reply.status_code == 404
    finally:
        access.removeHandler(handler)
        access.setLevel(previous)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "\\r\\n2026-01-01" in lines[0] and "\\x00" in lines[0] and "\\x1b" in lines[0]
    assert "\x1b" not in out.getvalue() and "\x00" not in out.getvalue()


def test_every_text_line_escapes_controls_and_json_lines_stay_json() -> None:
    logger = logging.getLogger("tests.log_escaping")
    logger.propagate = False
    text_handler, text = _capture(_TextFormatter(TEXT_FORMAT))
    json_handler, jsonl = _capture(JsonFormatter())
    for handler in (text_handler, json_handler):
        logger.addHandler(handler)
    try:
        logger.warning("model %s not found", "a\nb\rc\u2028d\x85e")
    finally:
        for handler in (text_handler, json_handler):
            logger.removeHandler(handler)
    assert len(text.getvalue().splitlines()) == 1
    assert "a\\nb\\rc\\u2028d\\x85e" in text.getvalue()
    (line,) = jsonl.getvalue().splitlines()
    assert json.loads(line)["message"] == "model a\nb\rc\u2028d\x85e not found"
