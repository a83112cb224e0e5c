"""Builds the gRPC core: servicers, health, reflection and the error interceptor."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from mlx_responses.service.core import Core
from mlx_responses.service.models.pool import health_name
from mlx_responses.service.rpc.auth import ApiKeyInterceptor
from mlx_responses.service.rpc.compaction_service import CompactionServicer
from mlx_responses.service.rpc.embeddings_service import EmbeddingsServicer
from mlx_responses.service.rpc.generation_service import GenerationServicer
from mlx_responses.service.rpc.hangups import quiet_hangup_logs
from mlx_responses.service.rpc.interceptors import ErrorInterceptor
from mlx_responses.service.rpc.jobs_service import JobsServicer
from mlx_responses.service.rpc.request_id import RequestIdInterceptor
from mlx_responses.service.rpc.storage_service import StorageServicer
from mlx_responses.service.shutdown import DrainInterceptor, DrainReport, drain

from mlx_responses.v1 import (
    compaction_service_pb2,
    compaction_service_pb2_grpc,
    embeddings_service_pb2,
    embeddings_service_pb2_grpc,
    generation_service_pb2,
    generation_service_pb2_grpc,
    jobs_service_pb2,
    jobs_service_pb2_grpc,
    storage_service_pb2,
    storage_service_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    generation_service_pb2.DESCRIPTOR.services_by_name["GenerationService"].full_name,
    storage_service_pb2.DESCRIPTOR.services_by_name["StorageService"].full_name,
    jobs_service_pb2.DESCRIPTOR.services_by_name["JobsService"].full_name,
    compaction_service_pb2.DESCRIPTOR.services_by_name["CompactionService"].full_name,
    embeddings_service_pb2.DESCRIPTOR.services_by_name["EmbeddingsService"].full_name,
)

# Token streams can carry large snapshots (the final response); allow generous messages.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Metadata a caller may send (an API key, a user agent): 16 kB soft / 32 kB hard. What the
# core sends back is bounded at the source (service/errors.py keeps an error under ~6 kB).
MAX_METADATA_BYTES = 16 * 1024
ABSOLUTE_MAX_METADATA_BYTES = 32 * 1024
# Once the work has drained, streams still open (Health.Watch) get this long before they are cut.
DRAINED_STOP_SECS = 0.5


@dataclass
class CoreServer:
    """A started gRPC server, its bound port and its health servicer."""

    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    core: Core
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def set_serving(self) -> None:
        """Marks every service SERVING (after the model loaded), and each model but one whose
        engine failed (`models/<id>`: NOT_SERVING while it is unloaded after failing)."""
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        for model in list(self.core.models.models.values()):
            await self._model_health(model.id, serving=model.failure is None)

    async def _model_health(self, model_id: str, *, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse
        await self.health.set(
            health_name(model_id), status.SERVING if serving else status.NOT_SERVING
        )

    def follow_models(self) -> None:
        """A model's health entry follows its engine: NOT_SERVING once it gave up, SERVING
        once it loaded again (the core's own entries stay SERVING: its other models serve,
        and a request loads that one again after its back-off)."""

        def changed(model_id: str, serving: bool) -> None:  # on the loop
            task = asyncio.get_running_loop().create_task(
                self._model_health(model_id, serving=serving)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self.core.models.on_health = changed

    async def set_not_serving(self) -> None:
        """Marks every service NOT_SERVING (the distributed group serving the model is lost:
        façades route around this core until the operator restarts the group)."""
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    def follow_group(self) -> None:
        """In a distributed group: health turns NOT_SERVING for good when the group is lost
        (called on the event loop once serving)."""
        link = self.core.models.link
        if link is None:
            return
        loop = asyncio.get_running_loop()

        def lost() -> None:  # on the loop
            task = loop.create_task(self.set_not_serving())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        link.listen(lambda reason: loop.call_soon_threadsafe(lost))

    async def shutdown(self, grace_secs: float) -> DrainReport:
        """SIGTERM: NOT_SERVING and no new RPCs at once; running work gets `grace_secs` to
        finish (service/shutdown.py), the rest ends cancelled; then the engine stops."""
        await self.health.enter_graceful_shutdown()
        report = await drain(self.core, grace_secs)  # new calls are refused from here on
        await self.server.stop(DRAINED_STOP_SECS)  # what is left: health watches and the like
        await self.core.close()
        return report


def _credentials(core: Core) -> grpc.ServerCredentials | None:
    cert, key = core.settings.grpc_tls_cert, core.settings.grpc_tls_key
    if cert is None or key is None:
        return None
    return grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])


async def start_core_server(
    core: Core, host: str, port: int, local_socket: str | None = None
) -> CoreServer:
    """Starts the gRPC server on host:port (port 0 picks one); health is NOT_SERVING until ready.

    With TLS settings host:port speaks TLS; `local_socket` (a unix socket path) adds a
    plaintext port for an in-process façade. API keys (when set) are checked on both.
    """
    quiet_hangup_logs()
    interceptors: list[grpc.aio.ServerInterceptor] = [DrainInterceptor(core), ErrorInterceptor()]
    if core.settings.api_keys:
        interceptors.insert(
            0, ApiKeyInterceptor(core.settings.api_keys, isolate=core.settings.isolate_keys)
        )
    # The request id is bound outermost, so refusal and error logs carry it too.
    interceptors.insert(0, RequestIdInterceptor())
    server = grpc.aio.server(
        interceptors=interceptors,
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_metadata_size", MAX_METADATA_BYTES),
            ("grpc.absolute_max_metadata_size", ABSOLUTE_MAX_METADATA_BYTES),
        ],
    )
    generation_service_pb2_grpc.add_GenerationServiceServicer_to_server(
        GenerationServicer(core), server
    )
    storage_service_pb2_grpc.add_StorageServiceServicer_to_server(StorageServicer(core), server)
    jobs_service_pb2_grpc.add_JobsServiceServicer_to_server(JobsServicer(core), server)
    compaction_service_pb2_grpc.add_CompactionServiceServicer_to_server(
        CompactionServicer(core), server
    )
    embeddings_service_pb2_grpc.add_EmbeddingsServiceServicer_to_server(
        EmbeddingsServicer(core), server
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    credentials = _credentials(core)
    if credentials is None:
        bound = server.add_insecure_port(f"{host}:{port}")
    else:
        bound = server.add_secure_port(f"{host}:{port}", credentials)
    if bound == 0:
        raise OSError(f"cannot bind gRPC on {host}:{port}")
    if local_socket is not None and server.add_insecure_port(f"unix:{local_socket}") == 0:
        raise OSError(f"cannot bind gRPC on unix:{local_socket}")
    await server.start()
    log.info(
        "gRPC core listening on %s:%d (%s)", host, bound, "TLS" if credentials else "plaintext"
    )
    core_server = CoreServer(server, bound, health_servicer, core)
    core_server.follow_models()
    return core_server
