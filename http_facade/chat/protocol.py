"""The Chat Completions request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from mlx_responses.http_facade.kit.cache_hints import LIFETIME_FIELDS
from mlx_responses.http_facade.kit.fields import Fields
from mlx_responses.http_facade.kit.openapi import array, ts
from mlx_responses.http_facade.kit.sampling import (
    MODEL,
    OPENAI_SCALARS,
    SAMPLING,
    STREAM,
    STREAM_OPTIONS,
    TEMPLATE_KWARGS,
    N,
)
from mlx_responses.http_facade.kit.shapes import Shape, union
from mlx_responses.http_facade.kit.tools import function_tool_schema, tool_choice_schema
from mlx_responses.service.limits import MAX_TOP_LOGPROBS

from mlx_responses.v1 import responses_pb2 as pb

# Left out of the schema (as input_image is from CreateResponseRequest): a text model refuses
# images, so no request holding one is valid for every model.
IMAGE_NOTE = (
    "A user message's content may also hold image parts for a vision model: "
    '`{"type": "image_url", "image_url": {"url": "data:image/png;base64,...", "detail": '
    '"auto|low|high"}}` (`image_url` may be the URL string itself; http(s) URLs need '
    "`--allow-remote-media`). A text-only model refuses them with a 400 `unsupported_content` "
    "naming `messages[i].content[j].type`."
)
# A prompt-cache breakpoint (cache_hints.py) may end a text part.
PART = "{type: 'text', text: string, prompt_cache_breakpoint?: ?{mode: 'explicit', ttl?: ?TTL}}"
CONTENT = f"string | {PART}[]"
# An assistant message's tool call, as the core's function_call item.
FUNCTION = Shape(None, None, "name!: text, arguments!: arguments = ''")
TOOL_CALL = Shape(
    None, pb.FunctionCallItem, "function!: F -> *, id!: text -> call_id", F=FUNCTION.nested()
)
message = ts(
    f"{{role: 'system' | 'developer' | 'user', content: {CONTENT}}}"
    f" | {{role: 'assistant', content?: ?({CONTENT}), tool_calls?: ?CALL[],"
    " reasoning_content?: string|null, reasoning?: string|null}"
    f" | {{role: 'tool', tool_call_id: string, content?: {CONTENT}}}",
    TTL={"enum": ["30m", "12h"]},
    CALL=TOOL_CALL.schema(),
)
message["anyOf"][0]["description"] = IMAGE_NOTE
# response_format's json_schema: its fields under `json_schema`.
SPEC = Shape(
    None,
    None,
    "name!: text, schema!: json = OBJECT -> schema_json, description?: text, strict?: flag",
    OBJECT={"type": "object"},
)
RESPONSE_FORMAT = union(
    Shape("text", pb.TextFormatText),
    Shape("json_object", pb.TextFormatJsonObject),
    Shape("json_schema", pb.TextFormatJsonSchema, "json_schema!: S -> *", S=SPEC.nested()),
    unknown="Unknown response_format type {}.",
)

FIELDS = Fields(
    MODEL,
    "messages!: messages = MESSAGES | The conversation so far, oldest first.",
    *OPENAI_SCALARS,
    "tools: tools = TOOLS | Function tools the model may call.",
    "tool_choice: tool_choice = TOOL_CHOICE | Whether and which tool to call.",
    "response_format: object ->text ~ FORMAT | Structured output.",
    STREAM,
    STREAM_OPTIONS,
    "max_tokens: integer 1.. | Output cap (max_completion_tokens first).",
    "max_completion_tokens: integer 1.. | Output cap.",
    *SAMPLING,
    N,
    "logprobs: boolean | Token logprobs in the answer.",
    f"top_logprobs: integer 0..{MAX_TOP_LOGPROBS} core int32 | Alternatives per token (needs"
    " `logprobs`).",
    "reasoning_effort: string | Passed to the chat template and the core.",
    TEMPLATE_KWARGS,
    *LIFETIME_FIELDS,
    MESSAGES={**array(message), "minItems": 1},
    TOOLS=array(function_tool_schema()),
    TOOL_CHOICE=tool_choice_schema(),
    FORMAT=RESPONSE_FORMAT,
)
