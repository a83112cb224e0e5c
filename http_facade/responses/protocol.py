"""The Responses request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from mlx_responses.http_facade.kit.cache_hints import LIFETIME_FIELDS
from mlx_responses.http_facade.kit.decode import INT32_MAX
from mlx_responses.http_facade.kit.fields import Field, Fields
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import (
    BOOLEAN,
    OPT_STRING,
    STRING,
    integer,
    nullable,
    obj,
    ref,
)
from mlx_responses.http_facade.kit.sampling import MODEL, OPENAI_SCALARS, SAMPLING, TEMPLATE_KWARGS
from mlx_responses.http_facade.kit.tools import (
    BUILTIN_TOOL_TYPES,
    function_tool_schema,
    tool_choice_schema,
)
from mlx_responses.service.limits import (
    MAX_COMPACT_THRESHOLD,
    MAX_TOP_LOGPROBS,
    REASONING_SUMMARIES,
)

# Hosted tools need services this server does not run: the core refuses them (seed) or drops
# them (`--hosted-tools drop`); any other unknown type is a 400 here.
HOSTED_TOOLS = {
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
    "file_search",
    "computer",
    "computer_use",
    "computer_use_preview",
    "code_interpreter",
    "image_generation",
    "mcp",
    "function_shell",
    "tool_search",
}
MEDIA_PARTS = {"input_audio"}  # input_image and input_file reach the core (media_parts.py)

custom_tool = obj(
    ("type", "name"),
    type={"const": "custom"},
    name=STRING,
    description=OPT_STRING,
    format=nullable(
        {
            "anyOf": [
                obj(("type",), type={"const": "text"}),
                obj(
                    ("type", "syntax", "definition"),
                    type={"const": "grammar"},
                    syntax={"enum": ["lark", "regex"]},
                    definition=STRING,
                ),
            ]
        }
    ),
)
# A hosted tool: the core refuses it, or drops it under `--hosted-tools drop`.
hosted_tool = obj(("type",), type={"enum": sorted(HOSTED_TOOLS)})
# A client-run built-in tool (shell, local_shell, apply_patch): served as the model's call.
builtin_tool = obj(("type",), type={"enum": list(BUILTIN_TOOL_TYPES)})
tools = [
    function_tool_schema(type_required=True),
    custom_tool,
    hosted_tool,
    builtin_tool,
]
namespace = obj(
    ("type", "name", "tools"),
    type={"const": "namespace"},
    name=STRING,
    description=OPT_STRING,
    tools={"type": "array", "items": {"anyOf": tools}},
)
json_schema_format = obj(
    ("type", "schema"),
    type={"const": "json_schema"},
    name=STRING,
    schema={"type": "object"},
    description=OPT_STRING,
    strict=nullable(BOOLEAN),
)

FIELDS = Fields(
    MODEL,
    Field(
        "input",
        "input",
        "A text, or the turn's items: messages, tool calls and outputs, references.",
        required=True,
        schema={
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "items": ref("InputItem"), "minItems": 1},
            ]
        },
    ),
    Field("instructions", "string", "A system message for this turn.", "instructions"),
    *OPENAI_SCALARS,
    Field(
        "previous_response_id", "string", "The response this turn follows.", "previous_response_id"
    ),
    Field("truncation", "string", "Only disabled.", "truncation", schema={"const": "disabled"}),
    Field("store", "boolean", "Whether the response is stored (default true).", "store"),
    Field("stream", "boolean", "Whether the answer streams as server-sent events.", "stream"),
    Field("background", "boolean", "Answer at once, generate in the background.", "background"),
    Field(
        "max_output_tokens",
        "integer",
        "Output cap, reasoning included.",
        "max_output_tokens",
        minimum=1,
        checked=False,
    ),
    Field(
        "top_logprobs",
        "integer",
        "Alternatives per token.",
        "top_logprobs",
        minimum=0,
        maximum=MAX_TOP_LOGPROBS,
        checked=False,
        limit=INT32_MAX,
    ),
    *SAMPLING[:4],
    Field(
        "tools",
        "tools",
        "Tools the model may call: functions, custom tools, namespaces, built-in and hosted ones.",
        schema={"type": "array", "items": {"anyOf": [*tools, namespace]}},
    ),
    Field(
        "tool_choice",
        "tool_choice",
        "Whether and which tool to call.",
        schema={
            "anyOf": [
                *tool_choice_schema()["anyOf"],
                builtin_tool,
                obj(
                    ("type", "tools"),
                    type={"const": "allowed_tools"},
                    mode={"enum": ["auto", "required"]},
                    tools={
                        "type": "array",
                        "items": {
                            "anyOf": [
                                obj(
                                    ("type", "name"),
                                    type={"enum": ["function", "custom"]},
                                    name=STRING,
                                ),
                                builtin_tool,
                            ]
                        },
                    },
                ),
            ]
        },
    ),
    Field(
        "text",
        "text",
        "The output format: text, a JSON object or a JSON schema.",
        schema=obj(
            format=nullable(
                {
                    "anyOf": [
                        obj(("type",), type={"enum": ["text", "json_object"]}),
                        json_schema_format,
                    ]
                }
            ),
            verbosity=OPT_STRING,
        ),
    ),
    Field(
        "reasoning",
        "reasoning",
        "Reasoning effort and summary.",
        schema=obj(effort=OPT_STRING, summary=nullable({"enum": list(REASONING_SUMMARIES)})),
    ),
    Field(
        "conversation",
        "conversation",
        "The conversation this turn joins (its id).",
        schema={"anyOf": [STRING, obj(("id",), id=STRING)]},
    ),
    Field(
        "context_management",
        "context_management",
        "Compaction once the prompt passes a threshold.",
        schema={
            "type": "array",
            "items": obj(
                ("type", "compact_threshold"),
                type={"const": "compaction"},
                compact_threshold=integer(1, MAX_COMPACT_THRESHOLD),
            ),
        },
    ),
    Field(
        "metadata",
        "metadata",
        "Up to 16 string pairs, stored with the response.",
        schema={"type": "object", "additionalProperties": STRING},
    ),
    Field(
        "include",
        "include",
        "Extra output to include (logprobs, encrypted reasoning).",
        schema={"type": "array", "items": STRING},
    ),
    TEMPLATE_KWARGS,
    Field("keep_alive", "keep_alive", schema=KEEP_ALIVE_SCHEMA),
    *LIFETIME_FIELDS,
)
