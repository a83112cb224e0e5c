"""The Anthropic Messages request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from dataclasses import replace

from mlx_responses.http_facade.anthropic.cache_control import TTLS
from mlx_responses.http_facade.kit.decode import INT32_MAX
from mlx_responses.http_facade.kit.fields import Fields
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import array, integer, nullable, ts
from mlx_responses.http_facade.kit.openapi import stop_sequences as stop_schema
from mlx_responses.http_facade.kit.sampling import MODEL, SAMPLING, STREAM, TEMPLATE_KWARGS
from mlx_responses.http_facade.kit.shapes import Shape
from mlx_responses.service.limits import MAX_STOP_SEQUENCES

from mlx_responses.v1 import responses_pb2 as pb

TOOL_CHOICE_MODES = {
    "auto": pb.TOOL_CHOICE_MODE_AUTO,
    "any": pb.TOOL_CHOICE_MODE_REQUIRED,
    "none": pb.TOOL_CHOICE_MODE_NONE,
}

# Left out of the schema (as input_image is from CreateResponseRequest): a text model refuses
# images, so no request holding one is valid for every model.
IMAGE_NOTE = (
    "A user message may also hold `image` blocks for a vision model: "
    '`{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "..."}}` '
    '(jpeg, png, gif, webp) or `{"type": "image", "source": {"type": "url", "url": "..."}}` '
    "(with `--allow-remote-media`). A text-only model refuses them with a 400 naming "
    "`messages[i].content[j]`; an image inside a `tool_result` is refused (tool outputs are text)."
)
# A cache breakpoint (`cache_control.py`): on text, tool_use and tool_result blocks, tools
# and the body itself.
cache = ts("?{type: 'ephemeral', ttl?: ?T}", T={"enum": list(TTLS)})
texts = ts("string | {type: 'text', text: string, cache_control?: C}[]", C=cache)
# An assistant's tool call, as the core's function_call item.
TOOL_USE = Shape(
    "tool_use",
    pb.FunctionCallItem,
    "input!: json = EMPTY -> arguments, id!: text -> call_id, name!: text",
    EMPTY={},
)
# Blocks by role: a user turn carries text and tool results, an assistant turn text,
# thinking and tool calls, a system turn (Claude Code sends them in `messages`) text.
TEXT_BLOCK = "{type: 'text', text: string, cache_control?: C}"
BLOCKS = {
    "user": f"{TEXT_BLOCK} | {{type: 'tool_result', tool_use_id: string, content?: ?T,"
    " is_error?: ?boolean, cache_control?: C}",
    "assistant": f"{TEXT_BLOCK} | {{type: 'thinking', thinking: string}}"
    " | {type: 'redacted_thinking'} | U",
    "system": "TEXT",
}
names = {"C": cache, "T": texts, "U": TOOL_USE.schema(cache_control=cache)}
names["TEXT"] = {"anyOf": [ts(TEXT_BLOCK, **names)]}
message = {
    "anyOf": [
        ts(f"{{role: '{role}', content: string | ({kinds})[]}}", **names)
        for role, kinds in BLOCKS.items()
    ],
    "description": IMAGE_NOTE,
}
# A client tool, as the core's function tool.
CUSTOM_TOOL = Shape(
    None,
    pb.FunctionTool,
    "name!: text, description?: text, input_schema!: json = OBJECT -> parameters_json",
    OBJECT={"type": "object"},
)
custom_tool = CUSTOM_TOOL.schema(type=nullable({"const": "custom"}), cache_control=cache)
# Any other type is an Anthropic server tool: the core refuses it, or drops it under
# `--hosted-tools drop`.
server_tool = ts("{type: T}", T={"type": "string", "not": {"const": "custom"}})
tool_choice = ts(
    "{type: M, disable_parallel_tool_use?: ?boolean}"
    " | {type: 'tool', name: string, disable_parallel_tool_use?: ?boolean}",
    M={"enum": sorted(TOOL_CHOICE_MODES)},
)
thinking_config = ts(
    "{type: 'enabled', budget_tokens: B} | {type: 'adaptive' | 'between_tools' | 'disabled'}",
    B=integer(1),
)

TEMPERATURE, TOP_P = SAMPLING[:2]
FIELDS = Fields(
    MODEL,
    "messages!: messages = MESSAGES | The conversation so far, oldest first.",
    "system: system = TEXTS | The system prompt: a text or text blocks.",
    "max_tokens!: integer 1.. ->max_output_tokens | Output cap.",
    "stop_sequences: stop = STOP | Where generation stops (not in the output).",
    TEMPERATURE,
    TOP_P,
    f"top_k: integer 0..{INT32_MAX} core int32 -> | Sample among the k likeliest tokens.",
    "tools: tools = TOOLS | Client tools, and server tools (refused or dropped by the core).",
    "tool_choice: tool_choice = TOOL_CHOICE | Whether and which tool to call.",
    "thinking: thinking = THINKING | Extended thinking, as the template's enable_thinking.",
    STREAM,
    "metadata: metadata = METADATA | `user_id`, recorded as the end user.",
    TEMPLATE_KWARGS,
    "cache_control: cache_control = CACHE | Automatic caching: marks the last block.",
    "keep_alive: keep_alive = KEEP_ALIVE",
    MESSAGES={**array(message), "minItems": 1},
    TEXTS=texts,
    STOP=stop_schema(MAX_STOP_SEQUENCES),
    TOOLS=array({"anyOf": [custom_tool, server_tool]}),
    TOOL_CHOICE=tool_choice,
    THINKING=thinking_config,
    METADATA=ts("{user_id?: string|null}"),
    CACHE=cache,
    KEEP_ALIVE=KEEP_ALIVE_SCHEMA,
)
# count_tokens takes a Messages body without its output cap.
COUNT_FIELDS = Fields(
    *(replace(f, required=False) if f.name == "max_tokens" else f for f in FIELDS)
)
