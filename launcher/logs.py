"""Logging of the command: text or JSON lines, each stamped with its request id."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from mlx_responses.http_facade.kit import request_id as http_request_id
from mlx_responses.service.rpc import request_id as rpc_request_id

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"

# Messages carry what clients control (paths, model names, ids): a control character in one
# must not start a forged line, move the cursor or colour a terminal. Every C0/C1 control and
# the Unicode line separators are written as escapes.
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]
_NAMED = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}
ESCAPES = {c: _NAMED.get(c, f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
# JSON escapes C0 controls itself; these it leaves raw under ensure_ascii=False.
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)}


def escape_controls(text: str) -> str:
    """`text` with every control character and line separator escaped (one log line)."""
    return text.translate(ESCAPES)


class RequestIdFilter(logging.Filter):
    """Adds `request_id`: the façade request's, or the core RPC's (the same id across the hop)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = http_request_id.current() or rpc_request_id.current()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False).translate(_JSON_ESCAPES)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "request_id", None) is None:
            record.request_id = "-"
        return super().format(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


def configure_logging(level: str, log_format: str) -> None:
    """Installs one stderr handler on the root logger with the filter and the chosen format."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else _TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
