"""GET /openapi.json: the façade's routes, built from its router and its codec tables.

Paths and methods come from the aiohttp router (every mounted route is listed); request bodies
from the decoder's tables (`to_proto.SCALAR_PARAMS`, roles, statuses, tool choices); enums of
responses from the encoder's tables (`from_proto`) and the error tables (`errors`). A test
validates real responses against this document, so the encoder and the schema cannot drift.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from importlib import metadata
from typing import Any

from aiohttp import web
from mlx_responses.http_facade import (
    builtin_items,
    conversations,
    errors,
    from_proto,
    routes,
    to_proto,
)
from mlx_responses.http_facade.anthropic import openapi as anthropic_openapi
from mlx_responses.http_facade.cache_hints import BREAKPOINT_TTLS
from mlx_responses.http_facade.chat import openapi as chat_openapi
from mlx_responses.http_facade.completions import openapi as completions_openapi
from mlx_responses.http_facade.embeddings import openapi as embeddings_openapi
from mlx_responses.http_facade.keep_alive import KEEP_ALIVE_SCHEMA
from mlx_responses.http_facade.openapi_kit import (
    BOOLEAN,
    INTEGER,
    JSON,
    NUMBER,
    OPT_STRING,
    SSE,
    STRING,
    Operation,
    Schema,
    integer,
    ref,
    sse_event,
)
from mlx_responses.http_facade.openapi_kit import nullable as _nullable
from mlx_responses.http_facade.openapi_kit import obj as _obj
from mlx_responses.service.limits import (
    MAX_COMPACT_THRESHOLD,
    MAX_ITEMS_PER_CALL,
    MAX_METADATA_KEY,
    MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
    MAX_TOP_LOGPROBS,
    REASONING_SUMMARIES,
)

from mlx_responses.v1 import responses_pb2 as pb

OPENAPI_VERSION = "3.1.0"
# The headers of a WebSocket handshake (RFC 6455); without them the GET is a 405.
WEBSOCKET_HANDSHAKE: dict[str, Schema] = {
    "Upgrade": {"const": "websocket"},
    "Connection": {"const": "Upgrade"},
    "Sec-WebSocket-Version": {"const": "13"},
    "Sec-WebSocket-Key": {"type": "string", "pattern": "^[A-Za-z0-9+/]{21}[AQgw]==$"},
}


def _json_type(kind: type | tuple[type, ...]) -> str:
    return {str: "string", bool: "boolean", int: "integer", to_proto.NUMBER: "number"}[kind]


# The ranges the core enforces (service/responses/validation.py), narrower than the proto's.
CORE_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0, 2),
    "top_p": (0, 1),
    "presence_penalty": (-2, 2),
    "frequency_penalty": (-2, 2),
    "top_logprobs": (0, MAX_TOP_LOGPROBS),
    "max_output_tokens": (1, to_proto.INT64_MAX),
}


def _scalar_schema(param: str, kind: type | tuple[type, ...]) -> Schema:
    schema: Schema = {"type": _json_type(kind)}
    if kind is int:  # the range the decoder enforces (the proto field's)
        limit = to_proto.INT_LIMITS.get(param, to_proto.INT64_MAX)
        schema.update(minimum=-limit - 1, maximum=limit)
    if param in CORE_RANGES:
        schema["minimum"], schema["maximum"] = CORE_RANGES[param]
    return schema


def _request_schemas() -> dict[str, Schema]:
    roles = sorted(to_proto.ROLES)
    statuses = sorted(to_proto.ITEM_STATUS)
    # `prompt_cache_breakpoint`: where a reusable prefix ends (cache_hints.py).
    breakpoint = _obj(
        ("mode",), mode={"const": "explicit"}, ttl=_nullable({"enum": list(BREAKPOINT_TTLS)})
    )
    text_part = _obj(
        ("type", "text"),
        type={"enum": ["input_text", "output_text", "text"]},
        text=STRING,
        prompt_cache_breakpoint=_nullable(breakpoint),
    )
    refusal_part = _obj(("type", "refusal"), type={"const": "refusal"}, refusal=STRING)
    # Refused for a text-only model, or a placeholder with --media drop (the core decides).
    media_part = _obj(("type",), type={"enum": sorted(to_proto.MEDIA_PARTS)})
    status = _nullable({"enum": statuses})
    # Structured output: its objects' text parts are joined (other entries are skipped).
    output = {
        "anyOf": [
            STRING,
            {
                "type": "array",
                "items": {"anyOf": [{"not": {"type": "object"}}, _obj(text=STRING)]},
            },
        ]
    }
    message = _obj(
        ("role", "content"),
        type=_nullable({"const": "message"}),
        id=OPT_STRING,
        role={"enum": roles},
        status=status,
        content={
            "anyOf": [
                STRING,
                {"type": "array", "items": {"anyOf": [text_part, refusal_part, media_part]}},
            ]
        },
    )
    function_call = _obj(
        ("type", "call_id", "name"),
        type={"const": "function_call"},
        id=OPT_STRING,
        status=status,
        call_id=STRING,
        name=STRING,
        arguments={"anyOf": [STRING, {"type": "object"}]},
        namespace=OPT_STRING,
    )
    function_call_output = _obj(
        ("type", "call_id", "output"),
        type={"const": "function_call_output"},
        id=OPT_STRING,
        status=status,
        call_id=STRING,
        output=output,
    )
    custom_tool_call = _obj(
        ("type", "call_id", "name"),
        type={"const": "custom_tool_call"},
        id=OPT_STRING,
        status=status,
        call_id=STRING,
        name=STRING,
        input=STRING,
        namespace=OPT_STRING,
    )
    custom_tool_call_output = _obj(
        ("type", "call_id", "output"),
        type={"const": "custom_tool_call_output"},
        id=OPT_STRING,
        status=status,
        call_id=STRING,
        output=output,
    )
    reasoning = _obj(
        ("type",),
        type={"const": "reasoning"},
        id=OPT_STRING,
        status=status,
        encrypted_content=OPT_STRING,
        summary=_nullable({"type": "array", "items": {"type": "object"}}),
        content=_nullable({"type": "array", "items": {"type": "object"}}),
    )
    compaction = _obj(
        ("type", "encrypted_content"),
        type={"const": "compaction"},
        id=OPT_STRING,
        encrypted_content=STRING,
    )
    custom_tool = _obj(
        ("type", "name"),
        type={"const": "custom"},
        name=STRING,
        description=OPT_STRING,
        format=_nullable(
            {
                "anyOf": [
                    _obj(("type",), type={"const": "text"}),
                    _obj(
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
    hosted_tool = _obj(("type",), type={"enum": sorted(to_proto.HOSTED_TOOLS)})
    # A client-run built-in tool (shell, local_shell, apply_patch): served as the model's call.
    builtin_tool = _obj(("type",), type={"enum": list(builtin_items.TOOL_TYPES)})
    tools = [
        chat_openapi.function_tool_schema(type_required=True),
        custom_tool,
        hosted_tool,
        builtin_tool,
    ]
    namespace = _obj(
        ("type", "name", "tools"),
        type={"const": "namespace"},
        name=STRING,
        description=OPT_STRING,
        tools={"type": "array", "items": {"anyOf": tools}},
    )
    json_schema_format = _obj(
        ("type", "schema"),
        type={"const": "json_schema"},
        name=STRING,
        schema={"type": "object"},
        description=OPT_STRING,
        strict=_nullable(BOOLEAN),
    )
    properties: dict[str, Schema] = {
        key: _nullable(_scalar_schema(key, kind)) for key, kind in to_proto.SCALAR_PARAMS.items()
    }
    # A required scalar (model) is a non-empty string: null or "" is refused like a missing one.
    for key in to_proto.REQUIRED_PARAMS:
        if key in properties:
            properties[key] = {"type": "string", "minLength": 1}
    properties.update(
        input={
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "items": ref("InputItem"), "minItems": 1},
            ]
        },
        tools=_nullable({"type": "array", "items": {"anyOf": [*tools, namespace]}}),
        tool_choice=_nullable(
            {
                "anyOf": [
                    *chat_openapi.tool_choice_schema()["anyOf"],
                    builtin_tool,
                    _obj(
                        ("type", "tools"),
                        type={"const": "allowed_tools"},
                        mode={"enum": ["auto", "required"]},
                        tools={
                            "type": "array",
                            "items": {
                                "anyOf": [
                                    _obj(
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
            }
        ),
        text=_nullable(
            _obj(
                format=_nullable(
                    {
                        "anyOf": [
                            _obj(("type",), type={"enum": ["text", "json_object"]}),
                            json_schema_format,
                        ]
                    }
                ),
                verbosity=OPT_STRING,
            )
        ),
        reasoning=_nullable(
            _obj(effort=OPT_STRING, summary=_nullable({"enum": list(REASONING_SUMMARIES)}))
        ),
        conversation=_nullable({"anyOf": [STRING, _obj(("id",), id=STRING)]}),
        context_management=_nullable(
            {
                "type": "array",
                "items": _obj(
                    ("type", "compact_threshold"),
                    type={"const": "compaction"},
                    compact_threshold=integer(1, MAX_COMPACT_THRESHOLD),
                ),
            }
        ),
        metadata=_nullable({"type": "object", "additionalProperties": STRING}),
        include=_nullable({"type": "array", "items": STRING}),
        chat_template_kwargs=_nullable({"type": "object"}),
        keep_alive=KEEP_ALIVE_SCHEMA,
        **chat_openapi.prompt_cache_lifetimes(),
    )
    properties["truncation"] = _nullable({"const": "disabled"})
    create = {
        "type": "object",
        "properties": properties,
        "required": list(to_proto.REQUIRED_PARAMS),
        "description": "Unknown fields are accepted and ignored.",
        # One history at a time: a chain or a conversation.
        "not": {
            "required": ["previous_response_id", "conversation"],
            "properties": {
                "previous_response_id": {"type": "string"},
                "conversation": {"not": {"type": "null"}},
            },
        },
    }
    compact = {
        "allOf": [ref("CreateResponseRequest")],
        "properties": {"keep_tokens": _nullable(integer(0))},
    }
    # Without a type, an object with an `id` (and no `role`) is a reference.
    item_reference = {
        "anyOf": [
            _obj(("type", "id"), type={"const": "item_reference"}, id=STRING),
            {**_obj(("id",), type={"type": "null"}, id=STRING), "not": {"required": ["role"]}},
        ]
    }
    whole_items = [
        message,
        function_call,
        function_call_output,
        custom_tool_call,
        custom_tool_call_output,
        reasoning,
        compaction,
        *builtin_items.item_schemas(),
    ]
    # A conversation holds whole items: no references, no compaction triggers.
    items = {
        "type": "array",
        "items": {"anyOf": whole_items},
        "maxItems": MAX_ITEMS_PER_CALL,
    }
    metadata = {
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": MAX_METADATA_VALUE},
        "propertyNames": {"maxLength": MAX_METADATA_KEY},
        "maxProperties": MAX_METADATA_PAIRS,
    }
    return {
        # A compaction_trigger item is a beta extension behind a header
        # (x-codex-beta-features: remote_compaction_v2), outside this document.
        "InputItem": {"anyOf": [*whole_items, item_reference]},
        "CreateResponseRequest": create,
        "CompactRequest": compact,
        "CreateConversationRequest": _obj(items=_nullable(items), metadata=_nullable(metadata)),
        # A null metadata clears it.
        "UpdateConversationRequest": _obj(("metadata",), metadata=_nullable(metadata)),
        "AddConversationItemsRequest": _obj(("items",), items=items),
        # POST /v1/models/{model}/load: an empty body keeps the server's --keep-alive.
        "LoadModelRequest": _obj(keep_alive=KEEP_ALIVE_SCHEMA),
    }


def _response_schemas() -> dict[str, Schema]:
    builtin_tool = _obj(("type",), type={"enum": list(builtin_items.TOOL_TYPES)})
    item_status = {"enum": sorted(set(from_proto.ITEM_STATUS.values()))}
    logprob = _obj(
        ("token", "logprob", "bytes"),
        token=STRING,
        logprob=NUMBER,
        bytes={"type": "array", "items": INTEGER},
        top_logprobs={"type": "array"},
    )
    part = {
        "anyOf": [
            _obj(
                ("type", "text", "annotations", "logprobs"),
                type={"const": "output_text"},
                text=STRING,
                annotations={"type": "array"},
                logprobs={"type": "array", "items": logprob},
            ),
            _obj(("type", "refusal"), type={"const": "refusal"}, refusal=STRING),
            _obj(("type", "text"), type={"enum": ["input_text", "reasoning_text"]}, text=STRING),
        ]
    }
    texts = {"type": "array", "items": _obj(("type", "text"), type=STRING, text=STRING)}
    item = {
        "anyOf": [
            _obj(
                ("id", "type", "status", "role", "content"),
                id=STRING,
                type={"const": "message"},
                status=item_status,
                role={"enum": sorted(set(from_proto.ROLE.values()))},
                content={"type": "array", "items": part},
            ),
            _obj(
                ("id", "type", "status", "call_id", "name", "arguments"),
                id=STRING,
                type={"const": "function_call"},
                status=item_status,
                call_id=STRING,
                name=STRING,
                arguments=STRING,
            ),
            _obj(
                ("id", "type", "status", "call_id", "name", "input"),
                id=STRING,
                type={"const": "custom_tool_call"},
                status=item_status,
                call_id=STRING,
                name=STRING,
                input=STRING,
            ),
            _obj(
                ("id", "type", "status", "call_id", "output"),
                id=STRING,
                type={"const": "function_call_output"},
                status=item_status,
                call_id=STRING,
                output=STRING,
            ),
            _obj(
                ("id", "type", "status", "summary", "content", "encrypted_content"),
                id=STRING,
                type={"const": "reasoning"},
                status=item_status,
                summary=texts,
                content=texts,
                encrypted_content=OPT_STRING,
            ),
            _obj(
                ("id", "type", "status", "call_id", "output"),
                id=STRING,
                type={"const": "custom_tool_call_output"},
                status=item_status,
                call_id=STRING,
                output=STRING,
            ),
            _obj(
                ("id", "type", "encrypted_content"),
                id=STRING,
                type={"const": "compaction"},
                encrypted_content=STRING,
            ),
            *builtin_items.item_schemas(),
        ]
    }
    usage = _obj(
        ("input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details"),
        input_tokens=INTEGER,
        input_tokens_details=_obj(
            ("cached_tokens",), cached_tokens=INTEGER, cache_write_tokens=INTEGER
        ),
        output_tokens=INTEGER,
        output_tokens_details=_obj(
            ("reasoning_tokens",),
            reasoning_tokens=INTEGER,
            accepted_prediction_tokens=INTEGER,
            rejected_prediction_tokens=INTEGER,
        ),
        total_tokens=INTEGER,
    )
    statuses = sorted({from_proto.status_name(v) for v in pb.ResponseStatus.values()})
    response = _obj(
        (
            *("id", "object", "created_at", "status", "completed_at", "error"),
            *("incomplete_details", "instructions", "max_output_tokens", "model", "output"),
            *("parallel_tool_calls", "previous_response_id", "reasoning", "store"),
            *("temperature", "text", "tool_choice", "tools", "top_p", "truncation", "usage"),
            "metadata",
        ),
        id=STRING,
        object={"const": "response"},
        created_at=INTEGER,
        status={"enum": statuses},
        completed_at=_nullable(INTEGER),
        error=_nullable(_obj(("code", "message"), code=STRING, message=STRING)),
        incomplete_details=_nullable(_obj(("reason",), reason=STRING)),
        instructions=OPT_STRING,
        max_output_tokens=_nullable(INTEGER),
        model=STRING,
        output={"type": "array", "items": ref("OutputItem")},
        parallel_tool_calls=BOOLEAN,
        previous_response_id=OPT_STRING,
        conversation=_nullable(_obj(("id",), id=STRING)),
        reasoning=_obj(effort=OPT_STRING, summary=OPT_STRING),
        service_tier=STRING,
        store=BOOLEAN,
        temperature=NUMBER,
        text=_obj(("format",), format=_obj(("type",), type=STRING)),
        tool_choice={
            "anyOf": [
                {"enum": sorted(set(from_proto.TOOL_CHOICE.values()))},
                _obj(("type", "name"), type={"enum": ["function", "custom"]}, name=STRING),
                builtin_tool,
            ]
        },
        tools={
            "type": "array",
            "items": {"anyOf": [_obj(("type", "name"), type=STRING, name=STRING), builtin_tool]},
        },
        top_logprobs=INTEGER,
        top_p=NUMBER,
        truncation=STRING,
        usage=ref("Usage"),
        user=OPT_STRING,
        metadata={"type": "object", "additionalProperties": STRING},
        background={"const": True},
    )
    error_types = sorted(
        {k.type for k in (*errors.REASON_TABLE.values(), *errors.GRPC_TABLE.values())}
        | {errors.FALLBACK.type, errors.INVALID_REQUEST.type}
    )
    event = _obj(
        ("type", "sequence_number"),
        type={"enum": sorted(from_proto.EVENT_NAMES.values())},
        sequence_number=INTEGER,
        response=ref("Response"),
        item=ref("OutputItem"),
        output_index=INTEGER,
        content_index=INTEGER,
        summary_index=INTEGER,
        item_id=STRING,
        delta=STRING,
        text=STRING,
        input=STRING,
        command_index=INTEGER,
        command=STRING,
    )
    return {
        "OutputItem": item,
        "ItemList": _obj(
            ("object", "data", "first_id", "last_id", "has_more"),
            object={"const": "list"},
            data={"type": "array", "items": ref("OutputItem")},
            first_id=OPT_STRING,
            last_id=OPT_STRING,
            has_more=BOOLEAN,
        ),
        "Conversation": _obj(
            ("id", "object", "created_at", "metadata"),
            id=STRING,
            object={"const": "conversation"},
            created_at=INTEGER,
            metadata={"type": "object", "additionalProperties": STRING},
        ),
        "DeletedConversation": _obj(
            ("id", "object", "deleted"),
            id=STRING,
            object={"const": "conversation.deleted"},
            deleted=BOOLEAN,
        ),
        "Usage": usage,
        "Response": response,
        "ResponseStreamEvent": event,
        "DeletedResponse": _obj(
            ("id", "object", "deleted"), id=STRING, object={"const": "response"}, deleted=BOOLEAN
        ),
        "InputTokens": _obj(
            ("object", "input_tokens"),
            object={"const": "response.input_tokens"},
            input_tokens=INTEGER,
        ),
        "Compaction": _obj(
            ("id", "object", "created_at", "model", "output", "usage"),
            id=STRING,
            object={"const": "response.compaction"},
            created_at=INTEGER,
            model=STRING,
            output={"type": "array", "items": ref("OutputItem")},
            usage=ref("Usage"),
        ),
        "Model": _obj(
            ("id", "object", "created", "owned_by"),
            id=STRING,
            object={"const": "model"},
            created=INTEGER,
            owned_by=STRING,
            context_length=INTEGER,
            loaded=BOOLEAN,
            memory_bytes=INTEGER,
            expires_at=_nullable(INTEGER),
            pinned=BOOLEAN,
            failure=_nullable(
                _obj(("message", "reload_after"), message=STRING, reload_after=INTEGER)
            ),
        ),
        "ModelList": _obj(
            ("object", "data"),
            object={"const": "list"},
            data={"type": "array", "items": ref("Model")},
        ),
        "Health": _obj(("status",), status={"enum": ["ok", "unavailable"]}),
        "Error": _obj(
            ("error",),
            error=_obj(
                ("message", "type", "param", "code"),
                message=STRING,
                type={"enum": error_types},
                param=OPT_STRING,
                code=OPT_STRING,
            ),
        ),
    }


def _operations() -> dict[Callable[..., Any], Operation]:
    return {
        routes.create_response: Operation("CreateResponseRequest", "Response", streams=True),
        # ?stream=true: a background response's events (replayed, then live).
        routes.get_response: Operation(ok="Response", streams=True),
        routes.open_socket: Operation(upgrade=True),
        routes.list_input_items: Operation(ok="ItemList"),
        conversations.create_conversation: Operation(
            "CreateConversationRequest", "Conversation", body_required=False
        ),
        conversations.retrieve_conversation: Operation(ok="Conversation"),
        conversations.update_conversation: Operation("UpdateConversationRequest", "Conversation"),
        conversations.delete_conversation: Operation(ok="DeletedConversation"),
        conversations.list_items: Operation(ok="ItemList"),
        conversations.add_items: Operation("AddConversationItemsRequest", "ItemList"),
        conversations.get_item: Operation(ok="OutputItem"),
        conversations.delete_item: Operation(ok="Conversation"),
        routes.delete_response: Operation(ok="DeletedResponse"),
        routes.cancel_response: Operation(ok="Response"),
        routes.input_tokens: Operation("CreateResponseRequest", "InputTokens"),
        routes.compact: Operation("CompactRequest", "Compaction"),
        routes.list_models: Operation(ok="ModelList"),
        routes.get_model: Operation(ok="Model"),
        routes.load_model: Operation("LoadModelRequest", "Model", body_required=False),
        routes.unload_model: Operation(ok="Model", extra={"409": "Error"}),
        routes.health: Operation(ok="Health", extra={"503": "Health"}),
        **chat_openapi.operations(),
        **completions_openapi.operations(),
        **embeddings_openapi.operations(),
        **anthropic_openapi.operations(),
    }


def _content(name: str, media: str = JSON) -> dict[str, Any]:
    return {media: {"schema": ref(name)}}


def _operation(route: web.AbstractRoute, known: dict[Callable[..., Any], Operation]) -> Schema:
    handler = route.handler
    doc = inspect.getdoc(handler) or ""
    spec = known.get(handler, Operation())
    ok: Schema = {"description": "OK"}
    if spec.ok is not None:
        ok["content"] = _content(spec.ok)
        if spec.streams:
            ok["content"][SSE] = {"schema": sse_event(spec.stream_event, spec.stream_done)}
    canonical = route.resource.canonical if route.resource is not None else ""
    operation: Schema = {
        # Unique per path: the bare aliases share handlers with their /v1 routes.
        "operationId": re.sub(r"\W+", "_", f"{route.method.lower()}{canonical}").strip("_"),
        "summary": doc.splitlines()[0] if doc else handler.__name__,
        "responses": {
            "200": ok,
            **{s: {"description": s, "content": _content(n)} for s, n in spec.extra.items()},
            "default": {"description": "An error envelope", "content": _content(spec.error)},
        },
    }
    params = re.findall(r"{(\w+)}", canonical)
    if params:
        operation["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": STRING} for p in params
        ]
    if spec.upgrade:
        operation["parameters"] = [
            {"name": name, "in": "header", "required": True, "schema": schema}
            for name, schema in WEBSOCKET_HANDSHAKE.items()
        ]
        operation["responses"] = {
            "101": {"description": "Switching Protocols: the Responses WebSocket mode"},
            "default": operation["responses"]["default"],
        }
    if spec.request is not None:
        operation["requestBody"] = {
            "required": spec.body_required,
            "content": _content(spec.request),
        }
    return operation


def build_document(app: web.Application, version: str = "0") -> Schema:
    """The OpenAPI 3.1 document of every route mounted on `app`."""
    known = _operations()
    paths: dict[str, Schema] = {}
    for route in app.router.routes():
        if route.method in ("HEAD", "*") or route.resource is None:
            continue
        paths.setdefault(route.resource.canonical, {})[route.method.lower()] = _operation(
            route, known
        )
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "mlx-responses", "version": version},
        "paths": paths,
        "components": {
            "schemas": {
                **_request_schemas(),
                **_response_schemas(),
                **chat_openapi.schemas(),
                **completions_openapi.schemas(),
                **embeddings_openapi.schemas(),
                **anthropic_openapi.schemas(),
            }
        },
    }


DOCUMENT = web.AppKey("openapi_document", dict)


def _version() -> str:
    try:
        return metadata.version("mlx-responses")
    except metadata.PackageNotFoundError:
        return "0"


async def openapi_json(request: web.Request) -> web.Response:
    """GET /openapi.json: the OpenAPI 3.1 document of this façade."""
    return web.json_response(request.app[DOCUMENT])


def install_openapi(app: web.Application) -> None:
    """Adds GET /openapi.json; the document is built once the router is complete (startup)."""

    async def build(app: web.Application) -> None:
        app[DOCUMENT] = build_document(app, _version())

    app.router.add_get("/openapi.json", openapi_json)
    app.on_startup.append(build)
