"""The OpenAPI schemas and operations of Responses and Conversations, from the codec tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    OPT_STRING,
    STRING,
    Operation,
    Schema,
    integer,
    ref,
)
from mlx_responses.http_facade.kit.openapi import nullable as _nullable
from mlx_responses.http_facade.kit.openapi import obj as _obj
from mlx_responses.http_facade.responses import (
    builtin_items,
    conversations,
    from_proto,
    routes,
)
from mlx_responses.http_facade.responses.protocol import FIELDS, ITEMS, MESSAGE
from mlx_responses.service.limits import (
    MAX_ITEMS_PER_CALL,
    MAX_METADATA_KEY,
    MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
)

from mlx_responses.v1 import responses_pb2 as pb


def _request_schemas() -> dict[str, Schema]:
    message = MESSAGE.schema(type=_nullable({"const": "message"}))
    create = request_schema(
        FIELDS,
        "Unknown fields are accepted and ignored.",
        # One history at a time: a chain or a conversation.
        **{
            "not": {
                "required": ["previous_response_id", "conversation"],
                "properties": {
                    "previous_response_id": {"type": "string"},
                    "conversation": {"not": {"type": "null"}},
                },
            }
        },
    )
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
        *(ITEMS[kind].schema() for kind in ITEMS if kind != "compaction_trigger"),
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
        "InputItem": {"anyOf": [*whole_items, item_reference]},
        "CreateResponseRequest": create,
        "CompactRequest": compact,
        "CreateConversationRequest": _obj(items=_nullable(items), metadata=_nullable(metadata)),
        # A null metadata clears it.
        "UpdateConversationRequest": _obj(("metadata",), metadata=_nullable(metadata)),
        "AddConversationItemsRequest": _obj(("items",), items=items),
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
                ("id", "type", "status", "summary", "content"),
                id=STRING,
                type={"const": "reasoning"},
                status=item_status,
                summary=texts,
                content=texts,
                encrypted_content=STRING,
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
    }


def operations() -> dict[Callable[..., Any], Operation]:
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
    }


def schemas() -> dict[str, Schema]:
    return {**_request_schemas(), **_response_schemas()}
