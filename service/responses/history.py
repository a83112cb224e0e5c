"""Resolves the history a turn continues from: a stored chain or a conversation transcript."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mlx_responses.service.errors import Reason, ServiceError, invalid
from mlx_responses.service.stores.base import ConversationStore, ResponseStore

from mlx_responses.v1 import responses_pb2 as pb


def status_name(status: int) -> str:
    """`queued`, `in_progress`, ...: the wire name of a ResponseStatus, for messages."""
    return pb.ResponseStatus.Name(status).removeprefix("RESPONSE_STATUS_").lower()


def store_disabled(what: str, param: str | None = None) -> ServiceError:
    """The refusal for a route that needs a disabled store."""
    return ServiceError(Reason.STORE_DISABLED, f"{what} is disabled on this server.", param=param)


async def _no_job() -> int | None:
    return None


@dataclass
class HistoryResolver:
    """Reads history for previous_response_id and conversation."""

    responses: ResponseStore
    conversations: ConversationStore
    # Status of an unfinished background job by id (None if no such job); set by the jobs.
    job_status: Callable[[str], Awaitable[int | None]] = field(default=lambda _id: _no_job())

    async def resolve(self, params: pb.CreateResponseParams) -> list[pb.Item]:
        """The items that precede this turn's input (instructions excluded)."""
        if params.HasField("previous_response_id"):
            return await self._chain(params.previous_response_id)
        if params.HasField("conversation"):
            if not self.conversations.enabled:
                raise store_disabled("The conversation store", "conversation")
            return await self.conversations.items(params.conversation)
        return []

    async def _chain(self, response_id: str) -> list[pb.Item]:
        if not self.responses.enabled:
            raise store_disabled("Response storage", "previous_response_id")
        pending = await self.job_status(response_id)
        if pending is not None:
            raise invalid(
                f"previous response '{response_id}' has not finished "
                f"(status: {status_name(pending)})",
                "previous_response_id",
            )
        stored = await self.responses.get(response_id)
        if stored is None:
            raise invalid(
                f"Previous response with id '{response_id}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        if not stored.response.store:
            # NOTE: store:false background objects stay readable but never chain (seed).
            raise invalid(
                f"Previous response with id '{response_id}' not found.",
                "previous_response_id",
                "previous_response_not_found",
            )
        return list(stored.context)
