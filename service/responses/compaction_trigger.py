"""Codex's remote compaction v2: a create request whose last input item is `compaction_trigger`.

It is answered by the compaction code of `POST /v1/responses/compact` (same refusals, nothing
stored), as a response whose only output item is the `compaction` item, so a client that waits
for it in `response.output_item.done` gets it there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlx_responses.service.responses.events import EventAssembler

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb

if TYPE_CHECKING:  # the runtime imports MLX
    from mlx_responses.service.models.runtime import ModelRuntime
    from mlx_responses.service.responses.pipeline import ResponsePipeline

TRIGGER = "compaction_trigger"


def is_trigger(params: pb.CreateResponseParams) -> bool:
    """Whether the request asks for a compaction (its last input item is the trigger)."""
    return bool(params.input) and params.input[-1].WhichOneof("item") == TRIGGER


async def compaction_events(
    pipeline: ResponsePipeline,
    runtime: ModelRuntime,
    params: pb.CreateResponseParams,
    response_id: str,
) -> list[ev.ResponseEvent]:
    """The whole event sequence of a compaction turn; refusals raise before any event."""
    history = pb.CreateResponseParams()
    history.CopyFrom(params)
    del history.input[-1]
    # The trigger rides a streamed create; the compact endpoint itself refuses `stream`.
    history.stream = False
    reply = await pipeline.compact(runtime, history, None)
    response = pipeline.initial_response(runtime, history, response_id)
    response.store = False  # NOTE: like /v1/responses/compact, nothing is stored
    assembler = EventAssembler(response, pipeline.ids)
    events = assembler.start()
    compaction = next(i for i in reply.output if i.WhichOneof("item") == "compaction")
    events += assembler.whole_item(compaction)
    events += assembler.finish(pb.RESPONSE_STATUS_COMPLETED, reply.usage, int(pipeline.clock()))
    return events
