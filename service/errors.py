"""Domain errors of the core and THE table mapping them to gRPC status codes and ErrorInfo."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

ERROR_DOMAIN = "mlx-responses"

# Errors travel in gRPC trailers (grpc-message, percent-encoded, and grpc-status-details-bin,
# base64): bounded here so an echoed client value can never overflow the metadata limits
# (service/server.py), which would turn a 400 into a transport failure.
MAX_ERROR_MESSAGE_BYTES = 1024
MAX_ERROR_FIELD_BYTES = 256
TRUNCATION_MARK = "… (truncated)"


def bounded(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes (on a character boundary), marked when cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    room = max(0, limit - len(TRUNCATION_MARK.encode()))
    return data[:room].decode("utf-8", "ignore") + TRUNCATION_MARK


class Reason(enum.Enum):
    """Why a request was refused; travels as `ErrorInfo.reason`."""

    INVALID_REQUEST = "INVALID_REQUEST"
    MODEL_NOT_FOUND = "MODEL_NOT_FOUND"
    NOT_FOUND = "NOT_FOUND"
    STORE_DISABLED = "STORE_DISABLED"
    CONTEXT_LENGTH_EXCEEDED = "CONTEXT_LENGTH_EXCEEDED"
    RATE_LIMITED = "RATE_LIMITED"
    QUEUE_FULL = "QUEUE_FULL"
    NOT_READY = "NOT_READY"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class GrpcMapping:
    """How one reason crosses gRPC."""

    code: grpc.StatusCode
    rpc_code: int


# THE table: reason -> gRPC status. The façade has the matching table to HTTP.
GRPC_TABLE: dict[Reason, GrpcMapping] = {
    Reason.INVALID_REQUEST: GrpcMapping(
        grpc.StatusCode.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT
    ),
    Reason.MODEL_NOT_FOUND: GrpcMapping(grpc.StatusCode.NOT_FOUND, code_pb2.NOT_FOUND),
    Reason.NOT_FOUND: GrpcMapping(grpc.StatusCode.NOT_FOUND, code_pb2.NOT_FOUND),
    Reason.STORE_DISABLED: GrpcMapping(
        grpc.StatusCode.FAILED_PRECONDITION, code_pb2.FAILED_PRECONDITION
    ),
    Reason.CONTEXT_LENGTH_EXCEEDED: GrpcMapping(
        grpc.StatusCode.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT
    ),
    Reason.RATE_LIMITED: GrpcMapping(
        grpc.StatusCode.RESOURCE_EXHAUSTED, code_pb2.RESOURCE_EXHAUSTED
    ),
    Reason.QUEUE_FULL: GrpcMapping(grpc.StatusCode.UNAVAILABLE, code_pb2.UNAVAILABLE),
    Reason.NOT_READY: GrpcMapping(grpc.StatusCode.UNAVAILABLE, code_pb2.UNAVAILABLE),
    Reason.STORE_UNAVAILABLE: GrpcMapping(grpc.StatusCode.UNAVAILABLE, code_pb2.UNAVAILABLE),
    Reason.UNAUTHENTICATED: GrpcMapping(grpc.StatusCode.UNAUTHENTICATED, code_pb2.UNAUTHENTICATED),
    Reason.INTERNAL: GrpcMapping(grpc.StatusCode.INTERNAL, code_pb2.INTERNAL),
}


class ServiceError(Exception):
    """A refusal with a reason, an OpenAI `param` and an optional OpenAI `code`."""

    def __init__(
        self,
        reason: Reason,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.param = param
        self.code = code


def invalid(message: str, param: str | None = None, code: str | None = None) -> ServiceError:
    """A 400-class refusal of a malformed or unsupported request."""
    return ServiceError(Reason.INVALID_REQUEST, message, param=param, code=code)


def to_rpc_status(error: ServiceError) -> status_pb2.Status:
    """The `google.rpc.Status` (with ErrorInfo) that carries `error` in the trailers."""
    metadata = {}
    if error.param is not None:
        metadata["param"] = bounded(error.param, MAX_ERROR_FIELD_BYTES)
    if error.code is not None:
        metadata["code"] = bounded(error.code, MAX_ERROR_FIELD_BYTES)
    info = error_details_pb2.ErrorInfo(
        reason=error.reason.value, domain=ERROR_DOMAIN, metadata=metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    return status_pb2.Status(
        code=GRPC_TABLE[error.reason].rpc_code,
        message=bounded(error.message, MAX_ERROR_MESSAGE_BYTES),
        details=[detail],
    )
