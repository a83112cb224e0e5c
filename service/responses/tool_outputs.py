"""A tool output in the input must answer a call the model made.

An output (`function_call_output`, `custom_tool_call_output`, or a built-in tool's) whose
`call_id` matches no call before it, in the history (the previous_response_id chain or the
conversation) or earlier in the input, is a 400 naming `input[i]`, as OpenAI answers ("No tool
call found for function call output with call_id ..."): rendered, it would be a result of a
call the model never made, and the model would be asked to go on from it. Chat's `tool`
messages and Anthropic's `tool_result` blocks reach the core as these items too, and the façade
names the error in their terms. Outputs already in the history are not checked again: they were
checked when they came in (or added to a conversation through its items API, which takes items
as they are).
"""

from __future__ import annotations

from collections.abc import Sequence

from mlx_responses.service.errors import invalid
from mlx_responses.service.text.builtin_tools import CALL_KINDS, OUTPUT_KINDS

from mlx_responses.v1 import responses_pb2 as pb

CALLS = ("function_call", "custom_tool_call", *CALL_KINDS)
OUTPUTS = ("function_call_output", "custom_tool_call_output", *OUTPUT_KINDS)


def _call_id(item: pb.Item, kinds: Sequence[str]) -> str | None:
    kind = item.WhichOneof("item")
    if kind not in kinds:
        return None
    call_id: str = getattr(item, kind).call_id
    return call_id


def check_outputs_answer_calls(history: Sequence[pb.Item], items: Sequence[pb.Item]) -> None:
    """Raises a 400 for the first output of `items` that answers no call before it."""
    calls = {c for item in history if (c := _call_id(item, CALLS)) is not None}
    for i, item in enumerate(items):
        if (call := _call_id(item, CALLS)) is not None:
            calls.add(call)
        elif (output := _call_id(item, OUTPUTS)) is not None and output not in calls:
            noun = str(item.WhichOneof("item")).replace("_", " ")
            raise invalid(
                f"No tool call found for {noun} with call_id '{output}': a tool output must "
                "answer a call made earlier in the input or the history it continues.",
                f"input[{i}]",
            )
