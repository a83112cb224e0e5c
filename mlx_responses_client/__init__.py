"""A typed Python client of the mlx-responses gRPC core (async and sync), over the generated stubs.

from mlx_responses_client import Client, text_params

with Client.connect("127.0.0.1:50051") as client:
    print(client.create(text_params("tiny-chat", "Reply with: hello")).output[0])
"""

from mlx_responses_client.aio import AsyncClient, AsyncEventStream
from mlx_responses_client.common import CHANNEL_OPTIONS, Metadata, text_params
from mlx_responses_client.sync import Client, EventStream

__all__ = [
    "CHANNEL_OPTIONS",
    "AsyncClient",
    "AsyncEventStream",
    "Client",
    "EventStream",
    "Metadata",
    "text_params",
]
