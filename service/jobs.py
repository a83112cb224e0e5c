"""Background responses: admission limits, the detached generation task, polling and cancel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb
from service.errors import Reason, ServiceError, invalid
from service.generation import ResponseGenerator, Turn
from service.history import status_name
from service.stores.base import StoredResponse
from service.stores.lru import BoundedLru

log = logging.getLogger(__name__)

TERMINAL = {
    pb.RESPONSE_STATUS_COMPLETED,
    pb.RESPONSE_STATUS_INCOMPLETE,
    pb.RESPONSE_STATUS_FAILED,
    pb.RESPONSE_STATUS_CANCELLED,
}
# Ephemeral objects are bounded by their TTL; the caps only keep a flood in check.
EPHEMERAL_MAX_ENTRIES = 4096


@dataclass
class Job:
    """One active background response."""

    turn: Turn
    nbytes: int
    status: pb.ResponseStatus = pb.RESPONSE_STATUS_QUEUED
    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    watchers: list[asyncio.Queue[list[ev.ResponseEvent] | None]] = field(default_factory=list)

    def publish(self, events: list[ev.ResponseEvent] | None) -> None:
        """Hands a batch of events (None: the end) to every watcher."""
        for queue in self.watchers:
            queue.put_nowait(events)

    @property
    def response_id(self) -> str:
        return self.turn.response.id

    def poll_view(self) -> pb.Response:
        """The object a poll sees before the job is terminal: no output, zero usage."""
        view = pb.Response()
        view.CopyFrom(self.turn.response)
        del view.output[:]
        view.usage.CopyFrom(pb.Usage())
        view.status = self.status
        view.ClearField("completed_at")
        return view


@dataclass
class JobManager:
    """Admits and runs `background: true` responses (in memory: a restart loses them)."""

    generator: ResponseGenerator
    max_jobs: int
    store_max_bytes: int
    ephemeral_ttl_secs: int
    clock: Callable[[], float] = time.monotonic
    active: dict[str, Job] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Final objects of store:false jobs: readable by polling, never usable for chaining.
        self.ephemeral: BoundedLru[pb.Response] = BoundedLru(
            EPHEMERAL_MAX_ENTRIES,
            max(self.store_max_bytes, 1 << 20),
            self.ephemeral_ttl_secs,
            self.clock,
        )
        self.generator.history.job_status = self.status_of

    def status_of(self, response_id: str) -> int | None:
        """The status of an unfinished job, or None."""
        job = self.active.get(response_id)
        return job.status if job is not None and job.status not in TERMINAL else None

    @property
    def active_bytes(self) -> int:
        return sum(job.nbytes for job in self.active.values())

    async def create(self, params: pb.CreateResponseParams) -> pb.Response:
        """Validates like a foreground request, checks the limits, starts the job."""
        if params.stream:
            raise invalid("'background' cannot be combined with 'stream'.", "stream")
        store = self.generator.responses
        if self.max_jobs == 0 or not store.enabled or self.store_max_bytes == 0:
            raise invalid(
                "Background mode is disabled on this server (the job limit, the response store "
                "or its byte budget is 0).",
                "background",
            )
        # Seed: context_management runs inside the job; its failure fails the job.
        turn = await self.generator.prepare(params, defer_compaction=True)
        turn.response.status = pb.RESPONSE_STATUS_QUEUED
        turn.response.background = True
        nbytes = turn.response.ByteSize() + sum(i.ByteSize() for i in turn.context)
        if len(self.active) >= self.max_jobs:
            raise ServiceError(
                Reason.RATE_LIMITED,
                f"{self.max_jobs} background jobs are already active; retry after one finishes.",
                code="rate_limit_exceeded",
            )
        if self.active_bytes + nbytes > self.store_max_bytes:
            raise ServiceError(
                Reason.RATE_LIMITED,
                "Active background jobs fill the response store's byte budget; retry later.",
                code="rate_limit_exceeded",
            )
        job = Job(turn=turn, nbytes=nbytes)
        self.active[job.response_id] = job
        job.task = asyncio.create_task(self._run(job), name=f"job-{job.response_id}")
        log.info("response %s: background job queued", job.response_id)
        return job.poll_view()

    async def _run(self, job: Job) -> None:
        final: pb.Response | None = None
        try:
            if job.cancel_requested:
                final = self._ended(job, pb.RESPONSE_STATUS_CANCELLED)
                return
            await self.generator.run_compaction(job.turn)
            async for events in self.generator.stream(job.turn):
                job.status = pb.RESPONSE_STATUS_IN_PROGRESS
                job.publish(events)
                last = events[-1]
                if last.HasField("snapshot") and last.snapshot.response.status in TERMINAL:
                    final = last.snapshot.response
                    job.status = final.status
        except ServiceError as error:
            code = "server_overloaded" if error.reason is Reason.QUEUE_FULL else "invalid_prompt"
            refused = (Reason.INVALID_REQUEST, Reason.CONTEXT_LENGTH_EXCEEDED)
            if error.reason is not Reason.QUEUE_FULL and error.reason not in refused:
                code = "server_error"
            final = self._ended(job, pb.RESPONSE_STATUS_FAILED, code, error.message)
        except asyncio.CancelledError:
            final = self._ended(job, pb.RESPONSE_STATUS_CANCELLED)
            raise
        except Exception as exc:
            log.exception("response %s: background job crashed", job.response_id)
            final = self._ended(job, pb.RESPONSE_STATUS_FAILED, "server_error", str(exc))
        finally:
            if final is not None:
                await self._keep(job, final)
            self.active.pop(job.response_id, None)
            job.publish(None)
            job.done.set()

    def _ended(
        self, job: Job, status: pb.ResponseStatus, code: str | None = None, message: str = ""
    ) -> pb.Response:
        final = job.poll_view()
        final.status = status
        final.completed_at = int(self.generator.clock())
        if code is not None:
            final.error.CopyFrom(pb.ResponseError(code=code, message=message))
        return final

    async def _keep(self, job: Job, final: pb.Response) -> None:
        """Makes the final object pollable: stored (store:true) or ephemeral (store:false)."""
        if final.store:
            stored = await self.generator.responses.get(final.id)
            if stored is None:
                # The generator persisted it unless it was too big or never generated.
                kept = StoredResponse(response=final, context=[*job.turn.context, *final.output])
                if not await self.generator.responses.put(kept):
                    # NOTE: seed: an object larger than the budget leaves a failed stub.
                    stub = job.poll_view()
                    stub.status = pb.RESPONSE_STATUS_FAILED
                    stub.completed_at = final.completed_at
                    stub.error.CopyFrom(
                        pb.ResponseError(
                            code="server_error",
                            message="The final response is larger than the response store budget.",
                        )
                    )
                    self.ephemeral.put(final.id, stub, 0)
            return
        self.ephemeral.put(final.id, final, final.ByteSize())

    def get(self, response_id: str) -> pb.Response | None:
        """The poll view of an active job, or the kept object of an ephemeral/oversized one."""
        job = self.active.get(response_id)
        if job is not None:
            return job.poll_view()
        return self.ephemeral.get(response_id)

    def refuse_delete(self, response_id: str) -> None:
        """An unfinished background response cannot be deleted: cancel it first."""
        job = self.active.get(response_id)
        if job is not None:
            raise invalid(
                f"Response '{response_id}' is still {status_name(job.status)}; cancel it first.",
                "response_id",
            )

    async def watch(self, response_id: str) -> AsyncIterator[list[ev.ResponseEvent]]:
        """The job's events from now until it is terminal; None if no job is active."""
        job = self.active.get(response_id)
        if job is None:
            return
        queue: asyncio.Queue[list[ev.ResponseEvent] | None] = asyncio.Queue()
        job.watchers.append(queue)
        try:
            while (events := await queue.get()) is not None:
                yield events
        finally:
            job.watchers.remove(queue)

    def forget(self, response_id: str) -> bool:
        """Drops a kept ephemeral object; False if none."""
        return self.ephemeral.pop(response_id) is not None

    async def cancel(self, response_id: str) -> pb.Response | None:
        """Cancels an active job and returns its final object; None if no such job."""
        job = self.active.get(response_id)
        if job is None:
            return None
        job.cancel_requested = True
        if await self.generator.cancel(response_id) is None and job.task is not None:
            # Still queued ahead of the engine: stop the task itself.
            job.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(job.done.wait(), 30)
        stored = await self.generator.responses.get(response_id)
        return stored.response if stored is not None else self.ephemeral.get(response_id)

    async def close(self) -> None:
        """Cancels every job (shutdown)."""
        for job in list(self.active.values()):
            if job.task is not None:
                job.task.cancel()
        for job in list(self.active.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(job.done.wait(), 5)
