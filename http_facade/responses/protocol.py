"""The Responses request, declared once: the decoder and /openapi.json read it."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.cache_hints import BREAKPOINT_TTLS, LIFETIME_FIELDS
from mlx_responses.http_facade.kit.decode import expect
from mlx_responses.http_facade.kit.fields import Fields
from mlx_responses.http_facade.kit.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.kit.openapi import Schema, integer, ref, ts
from mlx_responses.http_facade.kit.openapi import array as list_of
from mlx_responses.http_facade.kit.sampling import MODEL, OPENAI_SCALARS, SAMPLING, TEMPLATE_KWARGS
from mlx_responses.http_facade.kit.shapes import (
    ARGUMENTS,
    FLAG,
    INT,
    JSON_TEXT,
    TEXT,
    Kind,
    Prop,
    Shape,
    array,
    enum,
    mapping,
    must,
    opt,
    req,
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
ROLES = {
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_DEVELOPER,
}
ITEM_STATUS = {
    "in_progress": pb.ITEM_STATUS_IN_PROGRESS,
    "completed": pb.ITEM_STATUS_COMPLETED,
    "incomplete": pb.ITEM_STATUS_INCOMPLETE,
}


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
MESSAGE = Shape(
    None,
    pb.MessageItem,
    role=must(enum(ROLES)),
    id=opt(TEXT),
    status=opt(STATUS),
    content=must(CONTENT),
)
CALL = {"status": opt(STATUS), "id": opt(TEXT), "call_id": req(TEXT)}
# Input items by type, and the Item field each fills; messages and references apart.
ITEMS = {
    "function_call": Shape(
        "function_call",
        pb.FunctionCallItem,
        **CALL,
        name=req(TEXT),
        arguments=must(ARGUMENTS, ""),
        namespace=opt(TEXT),
    ),
    "function_call_output": Shape(
        "function_call_output", pb.FunctionCallOutputItem, **CALL, output=must(OUTPUT)
    ),
    "custom_tool_call": Shape(
        "custom_tool_call",
        pb.CustomToolCallItem,
        **CALL,
        name=req(TEXT),
        input=must(TEXT, ""),
        namespace=opt(TEXT),
    ),
    "custom_tool_call_output": Shape(
        "custom_tool_call_output", pb.CustomToolCallOutputItem, **CALL, output=must(OUTPUT)
    ),
    "reasoning": Shape(
        "reasoning",
        pb.ReasoningItem,
        status=opt(STATUS),
        id=opt(TEXT),
        content=opt(_texts(pb.ReasoningText)),
        summary=opt(_texts(pb.SummaryText)),
        encrypted_content=opt(TEXT),
    ),
    # A compaction's status is checked, not kept.
    "compaction": Shape(
        "compaction",
        pb.CompactionItem,
        status=opt(STATUS, None),
        id=opt(TEXT),
        encrypted_content=req(TEXT),
    ),
    # A beta extension (x-codex-beta-features: remote_compaction_v2), outside the document.
    "compaction_trigger": Shape(
        "compaction_trigger", pb.CompactionTriggerItem, status=opt(STATUS, None)
    ),
}
SYNTAX = enum({"lark": "lark", "regex": "regex"}, "lark or regex", strings=True)
GRAMMAR = Shape("grammar", pb.CustomToolGrammar, syntax=req(SYNTAX), definition=req(TEXT))
CUSTOM_FORMAT = union(
    Shape("text", pb.CustomToolText),
    GRAMMAR,
    unknown="Unknown custom tool format type {}: expected text or grammar.",
)
CUSTOM_TOOL = Shape(
    "custom", pb.CustomTool, name=req(TEXT), description=opt(TEXT), format=opt(CUSTOM_FORMAT, "*")
)
# text.format's json_schema: `schema` as JSON text, `name`, `description`, `strict`.
JSON_SCHEMA = Shape(
    "json_schema",
    pb.TextFormatJsonSchema,
    schema=must(JSON_TEXT, to="schema_json"),
    name=must(TEXT, ""),
    description=opt(TEXT),
    strict=opt(FLAG),
)
FORMAT = union(
    Shape("text", pb.TextFormatText),
    Shape("json_object", pb.TextFormatJsonObject),
    JSON_SCHEMA,
    unknown="Unknown text.format type {}.",
)
TEXT_CONFIG = Shape(None, pb.TextConfig, format=Prop(FORMAT, to="*"), verbosity=opt(TEXT)).nested()
SUMMARIES = Kind({"enum": list(REASONING_SUMMARIES)}, TEXT.check)  # the core checks the names
REASONING = Shape(None, pb.ReasoningConfig, effort=opt(TEXT), summary=opt(SUMMARIES)).nested()


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
    Shape(None, pb.ContextManagement, type=must(TEXT), compact_threshold=opt(INT)).nested(),
    {"type": "array", "items": COMPACTION},
)
# A hosted tool (the core refuses it, or drops it under `--hosted-tools drop`), or a
# client-run built-in tool (shell, local_shell, apply_patch): served as the model's call.
hosted_tool = ts("{type: H}", H={"enum": sorted(HOSTED_TOOLS)})
builtin_tool = ts("{type: B}", B={"enum": list(BUILTIN_TOOL_TYPES)})
tools = [function_tool_schema(type_required=True), CUSTOM_TOOL.schema(), hosted_tool, builtin_tool]
# A namespace's tools are read by hand (one level only).
NAMESPACE = Shape("namespace", pb.NamespaceTool, name=req(TEXT), description=opt(TEXT))
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
    "stream: boolean -> | Whether the answer streams as server-sent events.",
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
