"""API keys and TLS on real processes: 401 envelopes, constant-time keys never logged, gRPC too."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import grpc
import httpx
import openai
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mlx_responses.v1 import generation_service_pb2, generation_service_pb2_grpc
from tests.support.processes import free_port, process, wait_status

pytestmark = pytest.mark.e2e

FLAG_KEY = "sk-flag-7f3a9c1e55d2"
ENV_KEYS = "sk-env-one-0b8e4d,sk-env-two-93c1aa"
WRONG_KEY = "sk-wrong-c0ffee1234"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A throwaway certificate for localhost / 127.0.0.1 and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "core.pem", folder / "core.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _error(reply: httpx.Response) -> dict[str, object]:
    assert reply.status_code == 401, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return dict(error)


def _models(channel: grpc.Channel, key: str | None) -> grpc.StatusCode:
    stub = generation_service_pb2_grpc.GenerationServiceStub(channel)
    metadata = [("authorization", f"Bearer {key}")] if key else None
    try:
        stub.ListModels(generation_service_pb2.ListModelsRequest(), metadata=metadata, timeout=10)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_serve_with_keys_and_tls(model_path: Path, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    http, grpc_port = free_port(), free_port()
    with process(
        "serve", "--model", str(model_path), "--port", str(http), "--grpc-port", str(grpc_port),
        "--api-key", FLAG_KEY, "--grpc-tls-cert", str(cert), "--grpc-tls-key", str(key),
        env={"MLX_RESPONSES_API_KEY": ENV_KEYS},
    ) as proc:  # fmt: skip
        wait_status(http, 200, proc)  # /health stays open
        base = f"http://127.0.0.1:{http}"
        missing = _error(httpx.post(f"{base}/v1/responses", json={}, timeout=30))
        assert missing["code"] is None and "API key" in str(missing["message"])
        wrong = _error(
            httpx.get(
                f"{base}/v1/models", headers={"Authorization": f"Bearer {WRONG_KEY}"}, timeout=30
            )
        )
        assert wrong["code"] == "invalid_api_key"
        assert WRONG_KEY not in str(wrong["message"])
        _error(httpx.get(f"{base}/v1/responses/x", headers={"Authorization": "Basic abc"}))
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{base}/v1", api_key=WRONG_KEY).models.list()
        for good in (FLAG_KEY, ENV_KEYS.split(",")[1]):
            client = openai.OpenAI(base_url=f"{base}/v1", api_key=good)
            resp = client.responses.create(
                model=model_path.name, input="Reply with: hello", max_output_tokens=16
            )
            assert resp.output_text == "hello"
            assert client.responses.retrieve(resp.id).id == resp.id

        # The gRPC port speaks TLS only, and wants the same keys (health stays open).
        ca = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{grpc_port}", ca) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            assert _models(channel, None) == grpc.StatusCode.UNAUTHENTICATED
            assert _models(channel, WRONG_KEY) == grpc.StatusCode.UNAUTHENTICATED
            assert _models(channel, ENV_KEYS.split(",", maxsplit=1)[0]) == grpc.StatusCode.OK
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as plain:
            assert _models(plain, FLAG_KEY) == grpc.StatusCode.UNAVAILABLE
        output = proc.output()
    for secret in (FLAG_KEY, WRONG_KEY, *ENV_KEYS.split(",")):
        assert secret not in output


def test_facade_forwards_keys_to_a_tls_core(model_path: Path, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    http, grpc_port, metrics_port = free_port(), free_port(), free_port()
    # Only the core holds the key: the façade forwards the caller's, the core decides.
    with (
        process(
            "core", "--model", str(model_path), "--grpc-port", str(grpc_port),
            "--api-key", FLAG_KEY, "--grpc-tls-cert", str(cert), "--grpc-tls-key", str(key),
            "--metrics-port", str(metrics_port),
        ) as core,
        process(
            "facade", "--core", f"localhost:{grpc_port}", "--port", str(http),
            "--core-tls-ca", str(cert),
        ) as facade,
    ):  # fmt: skip
        wait_status(http, 200, facade)
        base = f"http://127.0.0.1:{http}/v1"
        with pytest.raises(openai.AuthenticationError) as refused:
            openai.OpenAI(base_url=base, api_key=WRONG_KEY).responses.create(
                model=model_path.name, input="Reply with: hello", max_output_tokens=8
            )
        assert refused.value.code == "invalid_api_key"
        client = openai.OpenAI(base_url=base, api_key=FLAG_KEY)
        stream = client.responses.create(
            model=model_path.name, input="Reply with: hello", max_output_tokens=16, stream=True
        )
        kinds = [event.type for event in stream]
        assert kinds[-1] == "response.completed"
        assert core.alive()

        # The core's --metrics-port takes the gRPC port's certificate and keys.
        metrics = f"https://localhost:{metrics_port}/metrics"
        tls = ssl.create_default_context(cafile=str(cert))
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
        missing = _error(httpx.get(metrics, verify=tls, timeout=30))
        assert missing["code"] is None and "API key" in str(missing["message"])
        wrong = _error(httpx.get(metrics, verify=tls, headers=_bearer(WRONG_KEY), timeout=30))
        assert wrong["code"] == "invalid_api_key" and WRONG_KEY not in str(wrong["message"])
        scraped = httpx.get(metrics, verify=tls, headers=_bearer(FLAG_KEY), timeout=30)
        assert scraped.status_code == 200
        assert "mlx_responses_generation_tokens_total" in scraped.text
        output = core.output()
    for secret in (FLAG_KEY, WRONG_KEY):
        assert secret not in output


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
