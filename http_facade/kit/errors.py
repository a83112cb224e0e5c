"""THE façade error table: core reasons and gRPC codes to OpenAI-shaped HTTP errors."""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from mlx_responses.service.envelope import (
    INVALID_API_KEY,
    MAX_ERROR_MESSAGE_BYTES,
    MAX_ERROR_PARAM_BYTES,
    MISSING_API_KEY,
    HttpError,
    OpenAIError,
    bounded,
)

STATUS_DETAILS_KEY = "grpc-status-details-bin"

__all__ = [
    "INVALID_API_KEY",
    "MAX_ERROR_MESSAGE_BYTES",
    "MAX_ERROR_PARAM_BYTES",
    "MISSING_API_KEY",
    "HttpError",
    "OpenAIError",
    "bounded",
]

# Core ErrorInfo.reason -> HTTP status and type. The OpenAI `code` is the core's decision
# (service/errors.py's table) and arrives in the ErrorInfo's metadata.
REASON_TABLE: dict[str, HttpError] = {
    "INVALID_REQUEST": HttpError(400, "invalid_request_error"),
    "MODEL_NOT_FOUND": HttpError(404, "invalid_request_error"),
    "NOT_FOUND": HttpError(404, "invalid_request_error"),
    "STORE_DISABLED": HttpError(400, "invalid_request_error"),
    "CONTEXT_LENGTH_EXCEEDED": HttpError(400, "invalid_request_error"),
    "RATE_LIMITED": HttpError(429, "rate_limit_error"),
    "QUEUE_FULL": HttpError(503, "server_error"),
    "NOT_READY": HttpError(503, "server_error"),
    "MODEL_BUSY": HttpError(409, "invalid_request_error"),
    "STORE_UNAVAILABLE": HttpError(503, "server_error"),
    "UNAUTHENTICATED": HttpError(401, "invalid_request_error"),
    "INTERNAL": HttpError(500, "server_error"),
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
# Every 503 is transient (a full generation queue, a model or core not ready, a store away) and
# says when to come back: the OpenAI and Anthropic SDKs wait a Retry-After of up to 60 s.
RETRY_AFTER_SECS = 1

# Failures the façade itself detects.
INVALID_JSON = HttpError(400, "invalid_request_error", "invalid_json")
INVALID_REQUEST = HttpError(400, "invalid_request_error")
UNKNOWN_ROUTE = HttpError(404, "invalid_request_error", "unknown_url")
METHOD_NOT_ALLOWED = HttpError(405, "invalid_request_error", "method_not_allowed")
REQUEST_TOO_LARGE = HttpError(413, "invalid_request_error", "request_too_large")
# A body labelled gzip/deflate that does not decode; an encoding the façade does not decode.
INVALID_CONTENT_ENCODING = HttpError(400, "invalid_request_error", "invalid_content_encoding")
UNSUPPORTED_CONTENT_ENCODING = HttpError(
    415, "invalid_request_error", "unsupported_content_encoding"
)
# A request aiohttp's HTTP parser refuses (malformed headers, framing, oversized lines).
BAD_HTTP_REQUEST = HttpError(400, "invalid_request_error", "invalid_http_request")
# `GET /v1/models/{model}` of a model no core serves.
MODEL_NOT_FOUND = HttpError(404, "invalid_request_error", "model_not_found")
# The `error.code` of a streamed response the core broke off (a response.failed frame).
STREAM_BROKEN_CODE = "server_error"


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
