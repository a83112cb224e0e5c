"""Domain errors of the core and THE table deciding, per reason, the gRPC status, the OpenAI
`code` a refusal carries (in ErrorInfo's metadata), and the `error.code` of a background response
that fails for that reason (in band, on the response object)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from mlx_responses.service.envelope import bounded

ERROR_DOMAIN = "mlx-responses"

# Errors travel in gRPC trailers (grpc-message, percent-encoded, and grpc-status-details-bin,
# base64): bounded here so an echoed client value can never overflow the metadata limits
# (service/server.py), which would turn a 400 into a transport failure.
MAX_ERROR_MESSAGE_BYTES = 1024
MAX_ERROR_FIELD_BYTES = 256


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
    MODEL_BUSY = "MODEL_BUSY"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    INTERNAL = "INTERNAL"


# In-band failure codes: the `error.code` of a response that failed after it was accepted.
SERVER_ERROR = "server_error"
INVALID_PROMPT = "invalid_prompt"
SERVER_OVERLOADED = "server_overloaded"


@dataclass(frozen=True)
class GrpcMapping:
    """How one reason crosses gRPC, and the OpenAI codes it stands for."""

    code: grpc.StatusCode
    rpc_code: int
    # The OpenAI `code` of a refusal for this reason, unless the raiser names a narrower one
    # (an INVALID_REQUEST's "invalid_value"); None: the envelope's code is null.
    openai_code: str | None
    # The `error.code` of a background response whose job fails for this reason.
    failure_code: str = SERVER_ERROR


def _row(
    code: grpc.StatusCode, openai_code: str | None, failure: str = SERVER_ERROR
) -> GrpcMapping:
    return GrpcMapping(code, getattr(code_pb2, code.name), openai_code, failure)


_S = grpc.StatusCode
# THE table: reason -> gRPC status and OpenAI codes. The façade maps reasons to HTTP statuses.
GRPC_TABLE: dict[Reason, GrpcMapping] = {
    Reason.INVALID_REQUEST: _row(_S.INVALID_ARGUMENT, None, INVALID_PROMPT),
    Reason.MODEL_NOT_FOUND: _row(_S.NOT_FOUND, "model_not_found"),
    Reason.NOT_FOUND: _row(_S.NOT_FOUND, "not_found"),
    Reason.STORE_DISABLED: _row(_S.FAILED_PRECONDITION, "store_disabled"),
    Reason.CONTEXT_LENGTH_EXCEEDED: _row(
        _S.INVALID_ARGUMENT, "context_length_exceeded", INVALID_PROMPT
    ),
    Reason.RATE_LIMITED: _row(_S.RESOURCE_EXHAUSTED, "rate_limit_exceeded"),
    Reason.QUEUE_FULL: _row(_S.UNAVAILABLE, "server_overloaded", SERVER_OVERLOADED),
    Reason.NOT_READY: _row(_S.UNAVAILABLE, "model_not_ready"),
    # An explicit unload of a model a request or background job is using.
    Reason.MODEL_BUSY: _row(_S.FAILED_PRECONDITION, "model_busy"),
    Reason.STORE_UNAVAILABLE: _row(_S.UNAVAILABLE, "store_unavailable"),
    Reason.UNAUTHENTICATED: _row(_S.UNAUTHENTICATED, "invalid_api_key"),
    Reason.INTERNAL: _row(_S.INTERNAL, SERVER_ERROR),
}


def failure_code(reason: Reason) -> str:
    """The in-band `error.code` of a response that fails for `reason` after it was accepted."""
    return GRPC_TABLE[reason].failure_code


class ServiceError(Exception):
    """A refusal with a reason, an OpenAI `param`, and the OpenAI `code` (the table's, unless
    the raiser names a narrower one)."""

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
        self.code = code if code is not None else GRPC_TABLE[reason].openai_code


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
