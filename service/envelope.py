"""The OpenAI error envelope: the one builder every HTTP surface answers errors with.

`{"error": {"message", "type", "param", "code"}}`, from the HTTP façade and from the core's own
metrics endpoint alike. Standard library only, so the façade may import it without pulling the
core (tests/unit/test_layering.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Error messages echo client values (a 100 kB model name, a path); the envelope carries a
# bounded copy, so an error is never larger than the mistake needs.
MAX_ERROR_MESSAGE_BYTES = 2048
MAX_ERROR_PARAM_BYTES = 256
TRUNCATION_MARK = "… (truncated)"


def bounded(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes (on a character boundary), marked when cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    room = max(0, limit - len(TRUNCATION_MARK.encode()))
    return data[:room].decode("utf-8", "ignore") + TRUNCATION_MARK


@dataclass(frozen=True)
class HttpError:
    """How one kind of failure reaches an HTTP client."""

    status: int
    type: str
    code: str | None = None


# OpenAI: a missing key has no code, a wrong one is invalid_api_key (every HTTP surface).
MISSING_API_KEY = HttpError(401, "invalid_request_error")
INVALID_API_KEY = HttpError(401, "invalid_request_error", "invalid_api_key")


class OpenAIError(Exception):
    """An error answered as `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(
        self, kind: HttpError, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        message = bounded(message, MAX_ERROR_MESSAGE_BYTES)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = bounded(param, MAX_ERROR_PARAM_BYTES) if param is not None else None
        self.code = code if code is not None else kind.code

    @property
    def status(self) -> int:
        return self.kind.status

    def body(self) -> dict[str, Any]:
        """The OpenAI error envelope."""
        return {
            "error": {
                "message": self.message,
                "type": self.kind.type,
                "param": self.param,
                "code": self.code,
            }
        }
