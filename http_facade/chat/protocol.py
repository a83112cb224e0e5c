"""The Chat Completions request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from mlx_responses.http_facade.kit.cache_hints import LIFETIME_FIELDS
from mlx_responses.http_facade.kit.decode import INT32_MAX
from mlx_responses.http_facade.kit.fields import Field, Fields
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
from mlx_responses.http_facade.kit.shapes import (
    ARGUMENTS,
    FLAG,
    JSON_TEXT,
    TEXT,
    Shape,
    must,
    opt,
    union,
)
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
FUNCTION = Shape(None, None, name=must(TEXT), arguments=must(ARGUMENTS, ""))
TOOL_CALL = Shape(
    None,
    pb.FunctionCallItem,
    function=must(FUNCTION.nested(), to="*"),
    id=must(TEXT, to="call_id"),
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
    name=must(TEXT),
    schema=must(JSON_TEXT, {"type": "object"}, "schema_json"),
    description=opt(TEXT),
    strict=opt(FLAG),
)
RESPONSE_FORMAT = union(
    Shape("text", pb.TextFormatText),
    Shape("json_object", pb.TextFormatJsonObject),
    Shape("json_schema", pb.TextFormatJsonSchema, json_schema=must(SPEC.nested(), to="*")),
    unknown="Unknown response_format type {}.",
)

FIELDS = Fields(
    MODEL,
    Field(
        "messages",
        "messages",
        "The conversation so far, oldest first.",
        required=True,
        schema={**array(message), "minItems": 1},
    ),
    *OPENAI_SCALARS,
    Field(
        "tools", "tools", "Function tools the model may call.", schema=array(function_tool_schema())
    ),
    Field(
        "tool_choice", "tool_choice", "Whether and which tool to call.", schema=tool_choice_schema()
    ),
    Field("response_format", "object", "Structured output.", "text", kind=RESPONSE_FORMAT),
    STREAM,
    STREAM_OPTIONS,
    Field("max_tokens", "integer", "Output cap (max_completion_tokens first).", minimum=1),
    Field("max_completion_tokens", "integer", "Output cap.", minimum=1),
    *SAMPLING,
    N,
    Field("logprobs", "boolean", "Token logprobs in the answer."),
    Field(
        "top_logprobs",
        "integer",
        "Alternatives per token (needs `logprobs`).",
        minimum=0,
        maximum=MAX_TOP_LOGPROBS,
        checked=False,
        limit=INT32_MAX,
    ),
    Field("reasoning_effort", "string", "Passed to the chat template and the core."),
    TEMPLATE_KWARGS,
    *LIFETIME_FIELDS,
)
