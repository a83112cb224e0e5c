"""THE façade error table: core reasons and gRPC codes to OpenAI-shaped HTTP errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"

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


# Core ErrorInfo.reason -> HTTP. The core's service/errors.py holds the matching gRPC table.
REASON_TABLE: dict[str, HttpError] = {
    "INVALID_REQUEST": HttpError(400, "invalid_request_error"),
    "MODEL_NOT_FOUND": HttpError(404, "invalid_request_error", "model_not_found"),
    "NOT_FOUND": HttpError(404, "invalid_request_error", "not_found"),
    "STORE_DISABLED": HttpError(400, "invalid_request_error", "store_disabled"),
    "CONTEXT_LENGTH_EXCEEDED": HttpError(400, "invalid_request_error", "context_length_exceeded"),
    "RATE_LIMITED": HttpError(429, "rate_limit_error", "rate_limit_exceeded"),
    "QUEUE_FULL": HttpError(503, "server_error", "server_overloaded"),
    "NOT_READY": HttpError(503, "server_error", "model_not_ready"),
    "STORE_UNAVAILABLE": HttpError(503, "server_error", "store_unavailable"),
    "UNAUTHENTICATED": HttpError(401, "invalid_request_error", "invalid_api_key"),
    "INTERNAL": HttpError(500, "server_error", "server_error"),
}

# gRPC failures that carry no ErrorInfo (transport trouble, unimplemented RPCs).
GRPC_TABLE: dict[grpc.StatusCode, HttpError] = {
    grpc.StatusCode.UNAVAILABLE: HttpError(503, "server_error", "core_unavailable"),
    grpc.StatusCode.UNIMPLEMENTED: HttpError(501, "server_error", "not_implemented"),
    grpc.StatusCode.DEADLINE_EXCEEDED: HttpError(504, "server_error", "timeout"),
    grpc.StatusCode.CANCELLED: HttpError(499, "server_error", "cancelled"),
    grpc.StatusCode.INVALID_ARGUMENT: HttpError(400, "invalid_request_error"),
    grpc.StatusCode.NOT_FOUND: HttpError(404, "invalid_request_error", "not_found"),
    grpc.StatusCode.UNAUTHENTICATED: HttpError(401, "invalid_request_error", "invalid_api_key"),
    # Without ErrorInfo this is gRPC's own message-size limit: the request was too large.
    grpc.StatusCode.RESOURCE_EXHAUSTED: HttpError(
        413, "invalid_request_error", "request_too_large"
    ),
}
FALLBACK = HttpError(500, "server_error", "server_error")

# Failures the façade itself detects.
INVALID_JSON = HttpError(400, "invalid_request_error", "invalid_json")
INVALID_REQUEST = HttpError(400, "invalid_request_error")
UNKNOWN_ROUTE = HttpError(404, "invalid_request_error", "unknown_url")
METHOD_NOT_ALLOWED = HttpError(405, "invalid_request_error", "method_not_allowed")
REQUEST_TOO_LARGE = HttpError(413, "invalid_request_error", "request_too_large")
# OpenAI: a missing key has no code, a wrong one is invalid_api_key.
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


def invalid(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    """A 400 invalid_request_error the façade raises while decoding a body."""
    return OpenAIError(INVALID_REQUEST, message, param=param, code=code)


def _error_info(metadata: Any) -> error_details_pb2.ErrorInfo | None:
    for key, value in metadata or ():
        if key == STATUS_DETAILS_KEY:
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None


def from_rpc_error(error: grpc.aio.AioRpcError) -> OpenAIError:
    """Translates a failed core call, reading the ErrorInfo the core attached."""
    info = _error_info(error.trailing_metadata())
    message = error.details() or error.code().name
    if info is not None and info.reason in REASON_TABLE:
        return OpenAIError(
            REASON_TABLE[info.reason],
            message,
            param=info.metadata.get("param"),
            code=info.metadata.get("code"),
        )
    if error.code() == grpc.StatusCode.UNAVAILABLE:
        # The transport's words ("failed to connect to all addresses...") need a subject.
        message = f"The model server (gRPC core) is unavailable; retry shortly. ({message})"
    return OpenAIError(GRPC_TABLE.get(error.code(), FALLBACK), message)


# Anthropic's Messages API answers errors as {"type": "error", "error": {"type", "message"}},
# the type named by the HTTP status; its routes (and anything under them) use that envelope.
ANTHROPIC_PATH_PREFIXES = ("/v1/messages", "/messages")
ANTHROPIC_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status (other 4xx: invalid request; 5xx: api_error)."""
    fallback = "invalid_request_error" if status < 500 else "api_error"
    return ANTHROPIC_ERROR_TYPES.get(status, fallback)


def anthropic_error_body(error: OpenAIError) -> dict[str, Any]:
    """The Anthropic error envelope of `error`."""
    return {
        "type": "error",
        "error": {"type": anthropic_error_type(error.status), "message": error.message},
    }


def speaks_anthropic(path: str) -> bool:
    """Whether a request path belongs to the Anthropic Messages API (its error envelope)."""
    return any(path == p or path.startswith(p + "/") for p in ANTHROPIC_PATH_PREFIXES)
