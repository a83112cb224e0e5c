"""Background responses: admission limits, the detached generation task, polling and cancel.

Jobs run on the core that admitted them; their poll views and final objects go to the job board
and the response store, which a Redis backend shares, so any replica answers a poll, refuses a
chain to an unfinished job, and forwards a cancel to the owner. The admission limits count the
active jobs of every replica sharing the board (the seed's limits, for the whole deployment).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

from mlx_responses.service.errors import SERVER_ERROR, Reason, ServiceError, failure_code, invalid
from mlx_responses.service.models.pool import Lease, ModelPool, keep_alive_of
from mlx_responses.service.responses.event_writer import JobEvents
from mlx_responses.service.responses.events import TERMINAL_EVENT as TERMINAL_EVENTS
from mlx_responses.service.responses.foreground_claims import ForegroundClaims
from mlx_responses.service.responses.history import status_name
from mlx_responses.service.responses.pipeline import ResponsePipeline, Turn
from mlx_responses.service.stores.base import Admission, EventLog, JobBoard, StoredResponse
from mlx_responses.service.stores.memory import InMemoryEventLog
from mlx_responses.service.stores.owned import OwnedMap

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

TERMINAL_STATUSES = {
    pb.RESPONSE_STATUS_COMPLETED,
    pb.RESPONSE_STATUS_INCOMPLETE,
    pb.RESPONSE_STATUS_FAILED,
    pb.RESPONSE_STATUS_CANCELLED,
}
# An owner renews its jobs' leases every heartbeat; a dead owner's jobs vanish after the lease.
HEARTBEAT_S = 1.0
LEASE_S = 15.0
# How long a cancel waits for the job to end (its owner may be another replica).
CANCEL_WAIT_S = 30.0
REMOTE_POLL_S = 0.05


def _is_terminal(events: list[ev.ResponseEvent]) -> bool:
    last = events[-1] if events else None
    return (
        last is not None
        and last.HasField("snapshot")
        and last.snapshot.response.status in TERMINAL_STATUSES
    )


@dataclass
class Job:
    """One active background response."""

    turn: Turn
    nbytes: int
    lease: Lease  # its model stays loaded until the job ends
    status: pb.ResponseStatus = pb.RESPONSE_STATUS_QUEUED
    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    watchers: list[asyncio.Queue[list[ev.ResponseEvent] | None]] = field(default_factory=list)
    # Every event streamed so far, for replays (service/responses/job_replay.py).
    log: JobEvents | None = None

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
    """Admits and runs `background: true` responses on this core; the board shows them to all."""

    models: ModelPool
    pipeline: ResponsePipeline
    board: JobBoard
    max_jobs: int
    store_max_bytes: int
    # Another key's jobs are not in it (--isolate-keys: service/stores/owned.py).
    active: OwnedMap[Job] = field(default_factory=OwnedMap)
    # Every event a job streams, for GET /v1/responses/{id}?stream=true (service/job_replay.py).
    events: EventLog = field(default_factory=lambda: InMemoryEventLog(1024, 64 << 20, 3600))

    def __post_init__(self) -> None:
        self.responses = self.pipeline.responses
        self._heartbeat: asyncio.Task[None] | None = None
        self._detached: set[asyncio.Task[object]] = set()
        # Foreground responses share the board's cancel channel and heartbeat.
        self.foreground = ForegroundClaims(
            self.pipeline.in_flight, self.board, LEASE_S, CANCEL_WAIT_S, REMOTE_POLL_S
        )

    async def start(self) -> None:
        """Listens for cancel requests from other replicas; renews leases while jobs run."""
        await self.board.listen(self._cancel_requested)
        self._heartbeat = asyncio.create_task(self._renew_leases(), name="job-heartbeat")

    def _detach(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Runs `work` on its own task, kept until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._detached.add(task)
        task.add_done_callback(self._detached.discard)
        return task

    def _cancel_requested(self, response_id: str) -> None:
        job = self.active.get(response_id)
        if job is None:
            self.foreground.cancel_requested(response_id)
        elif not job.cancel_requested:
            log.info("response %s: cancel requested by another replica", response_id)
            self._detach(self.cancel(response_id))

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                for rid in await self.board.renew(list(self.active), LEASE_S):
                    self._cancel_requested(rid)
                claims = list(self.foreground.claims)
                for rid in await self.board.renew_claims(claims, LEASE_S):
                    self.foreground.cancel_requested(rid)
            except ServiceError as error:
                log.warning("background job leases not renewed: %s", error.message)
            except Exception:
                log.exception("background job heartbeat failed")

    async def status_of(self, response_id: str) -> int | None:
        """The status of an unfinished job on any replica, or None."""
        job = self.active.get(response_id)
        if job is not None:
            return job.status if job.status not in TERMINAL_STATUSES else None
        view = await self.board.view(response_id)
        return view.status if view is not None else None

    def is_local(self, response_id: str) -> bool:
        """Whether this core runs the job."""
        return response_id in self.active

    async def create(self, params: pb.CreateResponseParams) -> pb.Response:
        """Validates like a foreground request, checks the limits, starts the job.

        Seed: "dropping the create connection cancels nothing": once the request is read, the
        create runs to its end (admitted and run, or refused) whether or not its caller stays.
        """
        task = self._detach(self._create(params))
        # A caller gone before the answer leaves the task be; its outcome is then unread.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)

    async def _create(self, params: pb.CreateResponseParams) -> pb.Response:
        if params.stream:
            raise invalid("'background' cannot be combined with 'stream'.", "stream")
        store = self.responses
        if self.max_jobs == 0 or not store.enabled or self.store_max_bytes == 0:
            raise invalid(
                "Background mode is disabled on this server (the job limit, the response store "
                "or its byte budget is 0).",
                "background",
            )
        lease = await self.models.acquire(params.model, keep_alive_of(params))
        try:
            return await self._admit(params, lease)
        except BaseException:
            lease.release()
            raise

    async def _admit(self, params: pb.CreateResponseParams, lease: Lease) -> pb.Response:
        # Seed: context_management runs inside the job; its failure fails the job.
        turn = await self.pipeline.prepare(lease.runtime, params, defer_compaction=True)
        # Seed: 503 when the generation queue is full, as for a foreground request (a queue that
        # fills after admission still fails the job with server_overloaded).
        lease.runtime.check_room()
        turn.response.status = pb.RESPONSE_STATUS_QUEUED
        turn.response.background = True
        nbytes = turn.response.ByteSize() + sum(i.ByteSize() for i in turn.context)
        job = Job(turn=turn, nbytes=nbytes, lease=lease)
        job.log = JobEvents(self.events, job.response_id)
        # The board counts every replica's active jobs, atomically: visible to all replicas
        # before the create call answers, or refused (Redis down: a 503, no job).
        try:
            admission = await self.board.admit(
                job.poll_view(), nbytes, self.max_jobs, self.store_max_bytes, LEASE_S
            )
        except asyncio.CancelledError:
            # The caller left mid-admission: a job it may have admitted must not hold a slot.
            self._detach(self.board.remove(job.response_id))
            raise
        if admission is Admission.TOO_MANY_JOBS:
            raise ServiceError(
                Reason.RATE_LIMITED,
                f"{self.max_jobs} background jobs are already active; retry after one finishes.",
            )
        if admission is Admission.OVER_BUDGET:
            raise ServiceError(
                Reason.RATE_LIMITED,
                "Active background jobs fill the response store's byte budget; retry later.",
            )
        self.active[job.response_id] = job
        job.task = asyncio.create_task(self._run(job), name=f"job-{job.response_id}")
        # Even a task cancelled before its first step lets its model go.
        job.task.add_done_callback(lambda _: job.lease.release())
        log.info("response %s: background job queued", job.response_id)
        return job.poll_view()

    async def _run(self, job: Job) -> None:
        final: pb.Response | None = None
        try:
            if job.cancel_requested:
                final = self._ended(job, pb.RESPONSE_STATUS_CANCELLED)
                return
            await self.pipeline.decode_media(job.turn)
            await self.pipeline.run_compaction(job.turn)
            # The stream opens (response.in_progress) before the engine takes the sequence;
            # seed: a job waiting for a batch slot is queued. The opening waits for the
            # engine's first output, and the job turns in_progress with it.
            # NOTE: the seed's in_progress starts with prefill; the engine reports no prefill
            # start, so a long prompt's prefill still reads queued.
            opening: list[ev.ResponseEvent] | None = None
            async for batch in self.pipeline.stream(job.turn):
                events = batch
                if opening is None:
                    opening = batch
                    if not _is_terminal(batch):
                        continue
                elif opening:
                    events, opening = [*opening, *batch], []
                if job.status == pb.RESPONSE_STATUS_QUEUED:
                    job.status = pb.RESPONSE_STATUS_IN_PROGRESS
                    await self._post(job)
                self._record(job, events)
                last = events[-1]
                if last.HasField("snapshot") and last.snapshot.response.status in TERMINAL_STATUSES:
                    # NOTE: the job's own status stays in_progress: a poll sees the final
                    # only once it is kept (a final too big for the store becomes a failed
                    # stub there, and a poll in between must not read it as finished).
                    final = last.snapshot.response
        except ServiceError as error:
            code = failure_code(error.reason)
            final = self._ended(job, pb.RESPONSE_STATUS_FAILED, code, error.message)
        except asyncio.CancelledError:
            final = self._ended(job, pb.RESPONSE_STATUS_CANCELLED)
            raise
        except Exception as exc:
            log.exception("response %s: background job crashed", job.response_id)
            final = self._ended(job, pb.RESPONSE_STATUS_FAILED, SERVER_ERROR, str(exc))
        finally:
            try:
                try:
                    if final is not None:
                        await self._keep(job, final)
                finally:
                    if final is not None:
                        self._record_end(job, final)
                    if job.log is not None:
                        await job.log.drain()  # the shared log is whole before the job leaves
                # Kept first, removed second: a poll elsewhere sees the view or the final.
                await self.board.remove(job.response_id)
            except ServiceError as error:
                # Unreachable store: the lease runs out and the id ends as unknown (404).
                log.error("response %s: final object not kept: %s", job.response_id, error.message)
            finally:
                self.active.pop(job.response_id, None)
                job.publish(None)
                job.done.set()

    def _record(self, job: Job, events: list[ev.ResponseEvent]) -> None:
        """Logs a batch, then hands it to the watchers (nothing in between: no gap, no await)."""
        if job.log is not None:
            job.log.add(events)
        job.publish(events)

    def _record_end(self, job: Job, final: pb.Response) -> None:
        """A job that ended without its terminal event (cancelled, failed early) logs one."""
        if job.log is None or job.log.ended:
            return
        event = ev.ResponseEvent(
            type=TERMINAL_EVENTS.get(final.status, ev.EVENT_TYPE_RESPONSE_FAILED),
            sequence_number=job.log.next_sequence,
            snapshot=ev.ResponseSnapshotEvent(response=final),
        )
        self._record(job, [event])

    async def _post(self, job: Job) -> None:
        try:
            await self.board.post(job.poll_view(), LEASE_S)
        except ServiceError as error:
            log.warning("response %s: job view not published: %s", job.response_id, error.message)

    def _ended(
        self, job: Job, status: pb.ResponseStatus, code: str | None = None, message: str = ""
    ) -> pb.Response:
        final = job.poll_view()
        final.status = status
        final.completed_at = int(time.time())
        if code is not None:
            final.error.CopyFrom(pb.ResponseError(code=code, message=message))
        return final

    async def _keep(self, job: Job, final: pb.Response) -> None:
        """Makes the final object pollable: stored (store:true) or ephemeral (store:false)."""
        if final.store:
            stored = await self.responses.get(final.id)
            if stored is None:
                # The pipeline persisted it unless it was too big or never generated.
                kept = StoredResponse(response=final, context=[*job.turn.context, *final.output])
                if not await self.responses.put(kept):
                    # NOTE: seed: an object larger than the budget leaves a failed stub.
                    stub = job.poll_view()
                    stub.status = pb.RESPONSE_STATUS_FAILED
                    stub.completed_at = final.completed_at
                    stub.error.CopyFrom(
                        pb.ResponseError(
                            code=SERVER_ERROR,
                            message="The final response is larger than the response store budget.",
                        )
                    )
                    await self.board.keep(stub, 0)
            return
        await self.board.keep(final, final.ByteSize())

    async def find(self, response_id: str) -> pb.Response | None:
        """The response as a poll sees it, wherever it is: THE lookup of a response by id.

        An active job's view (this replica's, else the board's), else the stored object, else a
        kept one (a `store: false` background response, or the failed stub of one too big to
        store). A finished job is stored or kept, never both (`_keep`).
        """
        job = self.active.get(response_id)
        if job is not None:
            return job.poll_view()
        view = await self.board.view(response_id)
        if view is not None:
            return view
        stored = await self.responses.get(response_id)
        return stored.response if stored is not None else await self.board.kept(response_id)

    async def refuse_delete(self, response_id: str) -> None:
        """An unfinished background response cannot be deleted: cancel it first."""
        status = await self.status_of(response_id)
        if status is not None:
            raise invalid(
                f"Response '{response_id}' is still {status_name(status)}; cancel it first.",
                "response_id",
            )

    async def wait_ended(self, response_id: str, timeout: float = CANCEL_WAIT_S) -> None:
        """Waits until no replica runs the job any more (or the timeout passes)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while await self.status_of(response_id) is not None:
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(REMOTE_POLL_S)

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

    async def forget(self, response_id: str) -> bool:
        """Drops a kept ephemeral object; False if none."""
        return await self.board.forget(response_id)

    async def cancel(self, response_id: str) -> pb.Response | None:
        """Cancels an active job (here or on its owner) and returns its final object.

        None if no replica runs such a job.
        """
        job = self.active.get(response_id)
        if job is None:
            if await self.board.view(response_id) is None:
                return None
            await self.board.request_cancel(response_id)
            await self.wait_ended(response_id)
            return await self.find(response_id)
        job.cancel_requested = True
        if await self.pipeline.in_flight.cancel(response_id) is None and job.task is not None:
            # Still queued ahead of the engine: stop the task itself.
            job.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(job.done.wait(), CANCEL_WAIT_S)
        return await self.find(response_id)

    async def close(self) -> None:
        """Cancels every job (shutdown)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        for job in list(self.active.values()):
            if job.task is not None:
                job.task.cancel()
        for job in list(self.active.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(job.done.wait(), 5)
