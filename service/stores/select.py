"""Opens the stores `--store` names: the embedded memory backend or a shared Redis."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mlx_responses.service.config import Settings
from mlx_responses.service.stores.base import ConversationStore, EventLog, JobBoard, ResponseStore
from mlx_responses.service.stores.memory import (
    InMemoryConversationStore,
    InMemoryEventLog,
    InMemoryJobBoard,
    InMemoryResponseStore,
)


async def _nothing() -> None:
    return None


def ephemeral_max_bytes(settings: Settings) -> int:
    """The byte cap of kept final objects: the response budget, at least 1 MiB."""
    return max(settings.responses_store_max_bytes, 1 << 20)


@dataclass
class Stores:
    """The shared pieces of state a core works with, and how to let them go."""

    responses: ResponseStore
    conversations: ConversationStore
    board: JobBoard
    # Background responses' events, for GET ?stream=true (the response store's limits).
    events: EventLog
    close: Callable[[], Awaitable[None]] = _nothing


def memory_stores(settings: Settings) -> Stores:
    """The embedded default: in-memory stores sized by the seed's flags."""
    s = settings
    return Stores(
        responses=InMemoryResponseStore(
            s.responses_store_max_entries, s.responses_store_max_bytes, s.responses_store_ttl_secs
        ),
        conversations=InMemoryConversationStore(
            s.conversation_store_max_entries,
            s.conversation_store_max_bytes,
            s.conversation_store_ttl_secs,
        ),
        board=InMemoryJobBoard(ephemeral_max_bytes(s), s.responses_background_ephemeral_ttl_secs),
        events=InMemoryEventLog(
            s.responses_store_max_entries, s.responses_store_max_bytes, s.responses_store_ttl_secs
        ),
    )


def redis_stores(settings: Settings, namespace: str | None = None) -> Stores:
    """Stores in the Redis at settings.store_url, shared by every core that names it."""
    from mlx_responses.service.stores.redis_jobs import RedisJobBoard
    from mlx_responses.service.stores.redis_store import (
        NAMESPACE,
        RedisBoundedMap,
        RedisConversationStore,
        RedisEventLog,
        RedisResponseStore,
        connect,
    )

    s = settings
    ns = namespace or NAMESPACE
    client = connect(s.store_url)

    async def close() -> None:
        await stores.board.close()
        await client.aclose()

    stores = Stores(
        responses=RedisResponseStore(
            RedisBoundedMap(
                client,
                f"{ns}:responses",
                s.responses_store_max_entries,
                s.responses_store_max_bytes,
                s.responses_store_ttl_secs,
            )
        ),
        conversations=RedisConversationStore(
            RedisBoundedMap(
                client,
                f"{ns}:conversations",
                s.conversation_store_max_entries,
                s.conversation_store_max_bytes,
                s.conversation_store_ttl_secs,
            )
        ),
        board=RedisJobBoard(
            client, ns, ephemeral_max_bytes(s), s.responses_background_ephemeral_ttl_secs
        ),
        events=RedisEventLog(
            RedisBoundedMap(
                client,
                f"{ns}:events",
                s.responses_store_max_entries,
                s.responses_store_max_bytes,
                s.responses_store_ttl_secs,
            )
        ),
        close=close,
    )
    return stores


def open_stores(settings: Settings) -> Stores:
    """The backend settings.store_url selects (`memory`, or `redis://host:port/db`)."""
    if settings.store_url == "memory":
        return memory_stores(settings)
    return redis_stores(settings)
