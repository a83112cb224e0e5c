"""The Responses request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.cache_hints import BREAKPOINT_TTLS, LIFETIME_FIELDS
from mlx_responses.http_facade.kit.decode import expect, proto_names
from mlx_responses.http_facade.kit.fields import Fields
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import Schema, integer, ref, ts
from mlx_responses.http_facade.kit.openapi import array as list_of
from mlx_responses.http_facade.kit.sampling import (
    MODEL,
    OPENAI_SCALARS,
    SAMPLING,
    STREAM,
    TEMPLATE_KWARGS,
)
from mlx_responses.http_facade.kit.shapes import (
    TEXT,
    Kind,
    Shape,
    array,
    enum,
    field_shapes,
    mapping,
    union,
)
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

from mlx_responses.v1 import responses_pb2 as pb

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
ROLES = proto_names(pb.Role, "user", "assistant", "system", "developer")
ITEM_STATUS = proto_names(pb.ItemStatus, "in_progress", "completed", "incomplete")


def _output(value: Any, param: str) -> str:
    """A tool output: a string, or the text parts of a structured output joined."""
    if isinstance(value, list):
        value = "".join(
            expect(p.get("text", ""), str, f"{param}[{i}].text", "a string")
            for i, p in enumerate(value)
            if isinstance(p, dict)
        )
    text: str = expect(value, str, param, "a string")
    return text


def _texts(message: Any) -> Kind:
    """Reasoning's `content` or `summary`: objects whose `text` each becomes a `message`."""

    def check(value: Any, param: str) -> list[Any]:
        parts = expect(value, list, param, "an array")
        for i, part in enumerate(parts):
            expect(part, dict, f"{param}[{i}]", "an object")
        return [message(text=str(part.get("text", ""))) for part in parts]

    return Kind({"type": "array", "items": {"type": "object"}}, check, container="list")


STATUS = enum(ITEM_STATUS)
# Structured output: its objects' text parts are joined (other entries are skipped).
OUTPUT = Kind(
    ts("string | (CHUNK | {text?: string})[]", CHUNK={"not": {"type": "object"}}), _output
)
# A message's content parts (the decoder's by hand: a part's type follows the role); a text
# part may end a reusable prefix, a media part is refused for a text-only model, or a
# placeholder with --media drop (the core decides).
CONTENT = Kind(
    ts(
        "string | ({type: 'input_text' | 'output_text' | 'text', text: string,"
        " prompt_cache_breakpoint?: ?{mode: 'explicit', ttl?: ?TTL}}"
        " | {type: 'refusal', refusal: string} | {type: MEDIA})[]",
        TTL={"enum": list(BREAKPOINT_TTLS)},
        MEDIA={"enum": sorted(MEDIA_PARTS)},
    ),
    None,
)
# The message's type is optional (an object with a role is a message): not the shape's kind.
KINDS = {"STATUS": STATUS, "OUTPUT": OUTPUT, "ROLE": enum(ROLES), "CONTENT": CONTENT}
KINDS.update(RT=_texts(pb.ReasoningText), ST=_texts(pb.SummaryText))
MESSAGE = Shape(
    None, pb.MessageItem, "role!: ROLE, id?: text, status?: STATUS, content!: CONTENT", **KINDS
)
CALL = "status?: STATUS, id?: text, call_id: text"
# Input items by type (each fills the Item field of its name); messages and references apart.
# A compaction's status is checked, not kept; a compaction_trigger is a beta extension
# (x-codex-beta-features: remote_compaction_v2), outside the document.
ITEMS_DECLARED = {
    "function_call": f"{CALL}, name: text, arguments!: arguments = '', namespace?: text",
    "function_call_output": f"{CALL}, output!: OUTPUT",
    "custom_tool_call": f"{CALL}, name: text, input!: text = '', namespace?: text",
    "custom_tool_call_output": f"{CALL}, output!: OUTPUT",
    "reasoning": "status?: STATUS, id?: text, content?: RT, summary?: ST, encrypted_content?: text",
    "compaction": "status?: STATUS -> _, id?: text, encrypted_content: text",
    "compaction_trigger": "status?: STATUS -> _",
}
ITEMS = field_shapes(pb.Item, ITEMS_DECLARED, **KINDS)
SYNTAX = enum({"lark": "lark", "regex": "regex"}, "lark or regex", strings=True)
GRAMMAR = Shape("grammar", pb.CustomToolGrammar, "syntax: SYNTAX, definition: text", SYNTAX=SYNTAX)
CUSTOM_FORMAT = union(
    Shape("text", pb.CustomToolText),
    GRAMMAR,
    unknown="Unknown custom tool format type {}: expected text or grammar.",
)
CUSTOM_TOOL = Shape(
    "custom", pb.CustomTool, "name: text, description?: text, format?: F -> *", F=CUSTOM_FORMAT
)
# text.format's json_schema: `schema` as JSON text, `name`, `description`, `strict`.
JSON_SCHEMA = Shape(
    "json_schema",
    pb.TextFormatJsonSchema,
    "schema!: json -> schema_json, name!: text = '', description?: text, strict?: flag",
)
FORMAT = union(
    Shape("text", pb.TextFormatText),
    Shape("json_object", pb.TextFormatJsonObject),
    JSON_SCHEMA,
    unknown="Unknown text.format type {}.",
)
TEXT_CONFIG = Shape(None, pb.TextConfig, "format?: F -> *, verbosity?: text", F=FORMAT).nested()
SUMMARIES = Kind({"enum": list(REASONING_SUMMARIES)}, TEXT.check)  # the core checks the names
REASONING = Shape(None, pb.ReasoningConfig, "effort?: text, summary?: S", S=SUMMARIES).nested()


def _conversation(value: Any, param: str) -> str:
    """A conversation's id, or the conversation (an object holding its id)."""
    if isinstance(value, dict):
        value = value.get("id")
        expect(value, str, f"{param}.id", "a string")
    text: str = expect(value, str, param, "a string or an object")
    return text


CONVERSATION = Kind(ts("string | {id: string}"), _conversation)
# What the core takes: the decoder checks types and ranges.
COMPACTION = ts("{type: 'compaction', compact_threshold: T}", T=integer(1, MAX_COMPACT_THRESHOLD))
CONTEXT_MANAGEMENT = array(
    Shape(None, pb.ContextManagement, "type!: text, compact_threshold?: int").nested(),
    {"type": "array", "items": COMPACTION},
)
# A hosted tool (the core refuses it, or drops it under `--hosted-tools drop`), or a
# client-run built-in tool (shell, local_shell, apply_patch): served as the model's call.
hosted_tool = ts("{type: H}", H={"enum": sorted(HOSTED_TOOLS)})
builtin_tool = ts("{type: B}", B={"enum": list(BUILTIN_TOOL_TYPES)})
tools = [function_tool_schema(type_required=True), CUSTOM_TOOL.schema(), hosted_tool, builtin_tool]
# A namespace's tools are read by hand (one level only).
NAMESPACE = Shape("namespace", pb.NamespaceTool, "name: text, description?: text")
namespace = NAMESPACE.schema(tools={"type": "array", "items": {"anyOf": tools}})
namespace["required"].append("tools")
tool_choice = tool_choice_schema()["anyOf"]
tool_choice += [
    builtin_tool,
    ts(
        "{type: 'allowed_tools', mode?: 'auto' | 'required',"
        " tools: ({type: 'function' | 'custom', name: string} | B)[]}",
        B=builtin_tool,
    ),
]

INPUT: list[Schema] = [{"type": "string", "minLength": 1}, list_of(ref("InputItem"))]
INPUT[1]["minItems"] = 1
FIELDS = Fields(
    MODEL,
    "input!: input = INPUT | A text, or the turn's items: messages, tool calls and outputs,"
    " references.",
    "instructions: string -> | A system message for this turn.",
    *OPENAI_SCALARS,
    "previous_response_id: string -> | The response this turn follows.",
    "truncation: string -> = DISABLED | Only disabled.",
    "store: boolean -> | Whether the response is stored (default true).",
    STREAM,
    "background: boolean -> | Answer at once, generate in the background.",
    "max_output_tokens: integer 1.. core -> | Output cap, reasoning included.",
    f"top_logprobs: integer 0..{MAX_TOP_LOGPROBS} core int32 -> | Alternatives per token.",
    *SAMPLING[:4],
    "tools: tools = TOOLS | Tools the model may call: functions, custom tools, namespaces,"
    " built-in and hosted ones.",
    "tool_choice: tool_choice = TOOL_CHOICE | Whether and which tool to call.",
    "text: object -> ~ TEXT | The output format: text, a JSON object or a JSON schema.",
    "reasoning: object -> ~ REASONING | Reasoning effort and summary.",
    "conversation: conversation -> ~ CONVERSATION | The conversation this turn joins (its id).",
    "context_management: array -> ~ CM | Compaction once the prompt passes a threshold.",
    "metadata: object -> ~ METADATA | Up to 16 string pairs, stored with the response.",
    "include: array -> ~ INCLUDE | Extra output to include (logprobs, encrypted reasoning).",
    TEMPLATE_KWARGS,
    "keep_alive: keep_alive = KEEP_ALIVE",
    *LIFETIME_FIELDS,
    INPUT={"anyOf": INPUT},
    DISABLED={"const": "disabled"},
    TOOLS={"type": "array", "items": {"anyOf": [*tools, namespace]}},
    TOOL_CHOICE={"anyOf": tool_choice},
    TEXT=TEXT_CONFIG,
    REASONING=REASONING,
    CONVERSATION=CONVERSATION,
    CM=CONTEXT_MANAGEMENT,
    METADATA=mapping(TEXT),
    INCLUDE=array(TEXT),
    KEEP_ALIVE=KEEP_ALIVE_SCHEMA,
)
