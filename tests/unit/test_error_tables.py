"""Both error tables, row by row: core reason -> gRPC code -> ErrorInfo -> HTTP status."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from grpc_status import rpc_status
from mlx_responses.http_facade.kit.errors import GRPC_TABLE, REASON_TABLE, from_rpc_error
from mlx_responses.service.errors import GRPC_TABLE as CORE_TABLE
from mlx_responses.service.errors import Reason, ServiceError, to_rpc_status

EXPECTED_HTTP = {
    Reason.INVALID_REQUEST: 400,
    Reason.MODEL_NOT_FOUND: 404,
    Reason.NOT_FOUND: 404,
    Reason.STORE_DISABLED: 400,
    Reason.CONTEXT_LENGTH_EXCEEDED: 400,
    Reason.RATE_LIMITED: 429,
    Reason.QUEUE_FULL: 503,
    Reason.NOT_READY: 503,
    Reason.MODEL_BUSY: 409,
    Reason.STORE_UNAVAILABLE: 503,
    Reason.UNAUTHENTICATED: 401,
    Reason.INTERNAL: 500,
}


class FakeRpcError(grpc.aio.AioRpcError):
    def __init__(self, code: grpc.StatusCode, details: str, trailing: Any) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details)


def test_every_reason_has_a_row_on_both_sides() -> None:
    assert set(CORE_TABLE) == set(Reason)
    assert {r.value for r in Reason} == set(REASON_TABLE)


@pytest.mark.parametrize("reason", list(Reason))
def test_reason_round_trips_to_http(reason: Reason) -> None:
    error = ServiceError(reason, "boom", param="p", code="c")
    status = rpc_status.to_status(to_rpc_status(error))
    assert status.code == CORE_TABLE[reason].code
    translated = from_rpc_error(FakeRpcError(status.code, "boom", status.trailing_metadata))
    assert translated.status == EXPECTED_HTTP[reason]
    body = translated.body()["error"]
    assert body == {
        "message": "boom",
        "type": REASON_TABLE[reason.value].type,
        "param": "p",
        "code": "c",
    }


def test_default_code_when_core_gives_none() -> None:
    error = ServiceError(Reason.MODEL_NOT_FOUND, "x")
    status = rpc_status.to_status(to_rpc_status(error))
    translated = from_rpc_error(FakeRpcError(status.code, "x", status.trailing_metadata))
    assert translated.code == "model_not_found"


@pytest.mark.parametrize(("code", "row"), list(GRPC_TABLE.items()))
def test_grpc_codes_without_error_info(code: grpc.StatusCode, row: Any) -> None:
    translated = from_rpc_error(FakeRpcError(code, "x", ()))
    assert translated.status == row.status


def test_unknown_code_is_500() -> None:
    assert from_rpc_error(FakeRpcError(grpc.StatusCode.DATA_LOSS, "x", ())).status == 500


def test_echoed_values_are_bounded_on_both_sides() -> None:
    from mlx_responses.http_facade.kit.errors import MAX_ERROR_MESSAGE_BYTES, OpenAIError
    from mlx_responses.service.errors import MAX_ERROR_FIELD_BYTES
    from mlx_responses.service.errors import MAX_ERROR_MESSAGE_BYTES as CORE_MAX

    error = ServiceError(Reason.INVALID_REQUEST, "bad '" + "€" * 50_000 + "'", param="p" * 9999)
    status = to_rpc_status(error)
    assert len(status.message.encode()) <= CORE_MAX
    assert status.message.startswith("bad '€") and status.message.endswith("(truncated)")
    grpc_status = rpc_status.to_status(status)
    # Everything that crosses as trailers stays well under gRPC's 8 kB default soft limit.
    trailer_bytes = sum(len(v) for _, v in grpc_status.trailing_metadata)
    assert trailer_bytes + len(grpc_status.details.encode()) * 3 < 8192
    translated = from_rpc_error(
        FakeRpcError(grpc_status.code, "€" * 10_000, grpc_status.trailing_metadata)
    )
    assert len(translated.message.encode()) <= MAX_ERROR_MESSAGE_BYTES
    assert translated.param is not None and len(translated.param) <= MAX_ERROR_FIELD_BYTES
    short = OpenAIError(REASON_TABLE["INVALID_REQUEST"], "short")
    assert short.message == "short"


# The OpenAI code each reason carries (decided by the core's table alone) and the in-band
# `error.code` of a background response that fails for it.
EXPECTED_CODES = {
    Reason.INVALID_REQUEST: (None, "invalid_prompt"),
    Reason.MODEL_NOT_FOUND: ("model_not_found", "server_error"),
    Reason.NOT_FOUND: ("not_found", "server_error"),
    Reason.STORE_DISABLED: ("store_disabled", "server_error"),
    Reason.CONTEXT_LENGTH_EXCEEDED: ("context_length_exceeded", "invalid_prompt"),
    Reason.RATE_LIMITED: ("rate_limit_exceeded", "server_error"),
    Reason.QUEUE_FULL: ("server_overloaded", "server_overloaded"),
    Reason.NOT_READY: ("model_not_ready", "server_error"),
    Reason.MODEL_BUSY: ("model_busy", "server_error"),
    Reason.STORE_UNAVAILABLE: ("store_unavailable", "server_error"),
    Reason.UNAUTHENTICATED: ("invalid_api_key", "server_error"),
    Reason.INTERNAL: ("server_error", "server_error"),
}


@pytest.mark.parametrize("reason", list(Reason))
def test_the_core_table_gives_the_code_that_reaches_http(reason: Reason) -> None:
    assert set(EXPECTED_CODES) == set(Reason)
    status = rpc_status.to_status(to_rpc_status(ServiceError(reason, "m")))
    translated = from_rpc_error(FakeRpcError(status.code, "m", status.trailing_metadata))
    assert translated.body()["error"]["code"] == EXPECTED_CODES[reason][0]
    assert REASON_TABLE[reason.value].code is None  # the façade restates no core code


def test_a_raiser_may_name_a_narrower_code() -> None:
    from mlx_responses.service.errors import invalid

    assert invalid("m", "p", "invalid_value").code == "invalid_value"
    assert invalid("m", "p").code is None


@pytest.mark.parametrize("reason", list(Reason))
def test_in_band_failure_code_of_each_reason(reason: Reason) -> None:
    from mlx_responses.service.errors import failure_code

    assert failure_code(reason) == EXPECTED_CODES[reason][1]


def test_every_http_surface_builds_the_same_envelope() -> None:
    """The façade and the core's metrics endpoint answer 401s from one builder and rows."""
    import json

    from mlx_responses.http_facade.kit import errors as facade_errors
    from mlx_responses.service import envelope
    from mlx_responses.service.rpc import metrics_server

    assert facade_errors.OpenAIError is envelope.OpenAIError
    assert facade_errors.MISSING_API_KEY is envelope.MISSING_API_KEY
    for missing, code in ((True, None), (False, "invalid_api_key")):
        reply = metrics_server._unauthorized(missing)
        body = json.loads(reply.body)  # type: ignore[arg-type]
        assert reply.status == 401 and reply.headers["WWW-Authenticate"] == "Bearer"
        assert set(body) == {"error"}
        assert body["error"]["type"] == "invalid_request_error"
        assert body["error"]["param"] is None and body["error"]["code"] == code
