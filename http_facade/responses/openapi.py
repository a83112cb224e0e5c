"""The OpenAPI schemas and operations of Responses and Conversations, from the codec tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlx_responses.http_facade.kit.fields import request_schema
from mlx_responses.http_facade.kit.openapi import (
    NULL,
    Operation,
    Schema,
    array,
    integer,
    nullable,
    ref,
    ts,
)
from mlx_responses.http_facade.responses import builtin_items, conversations, from_proto, routes
from mlx_responses.http_facade.responses.protocol import FIELDS, ITEMS, MESSAGE
from mlx_responses.service.limits import (
    MAX_ITEMS_PER_CALL,
    MAX_METADATA_KEY,
    MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE,
)

from mlx_responses.v1 import responses_pb2 as pb


def _request_schemas() -> dict[str, Schema]:
    # One history at a time: a chain or a conversation.
    one = ts("{previous_response_id: string, conversation: C}", C={"not": NULL})
    one = {"required": one["required"], "properties": one["properties"]}
    create = request_schema(FIELDS, "Unknown fields are accepted and ignored.", **{"not": one})
    # Without a type, an object with an `id` (and no `role`) is a reference.
    reference = ts(
        "{type: 'item_reference', id: string} | R",
        R={**ts("{type?: null, id: string}"), "not": {"required": ["role"]}},
    )
    whole_items = [
        MESSAGE.schema(type=nullable({"const": "message"})),
        *(ITEMS[kind].schema() for kind in ITEMS if kind != "compaction_trigger"),
        *builtin_items.item_schemas(),
    ]
    # A conversation holds whole items: no references, no compaction triggers.
    items = {**array({"anyOf": whole_items}), "maxItems": MAX_ITEMS_PER_CALL}
    metadata = {
        **ts("{[k]: V}", V={"type": "string", "maxLength": MAX_METADATA_VALUE}),
        "propertyNames": {"maxLength": MAX_METADATA_KEY},
        "maxProperties": MAX_METADATA_PAIRS,
    }
    return {
        "InputItem": {"anyOf": [*whole_items, reference]},
        "CreateResponseRequest": create,
        "CompactRequest": {
            "allOf": [ref("CreateResponseRequest")],
            "properties": {"keep_tokens": nullable(integer(0))},
        },
        "CreateConversationRequest": ts("{items?: ?I, metadata?: ?M}", I=items, M=metadata),
        # A null metadata clears it.
        "UpdateConversationRequest": ts("{metadata: ?M}", M=metadata),
        "AddConversationItemsRequest": ts("{items: I}", I=items),
    }


OUTPUT_ITEMS = {  # each output item's fields beside its id, type and status
    "message": "role: ROLE, content: PART[]",
    "function_call": "call_id: string, name: string, arguments: string",
    "custom_tool_call": "call_id: string, name: string, input: string",
    "function_call_output": "call_id: string, output: string",
    "reasoning": "summary: TEXTS, content: TEXTS, encrypted_content?: string",
    "custom_tool_call_output": "call_id: string, output: string",
}


def _response_schemas() -> dict[str, Schema]:
    builtin = ts("{type: B}", B={"enum": list(builtin_items.TOOL_TYPES)})
    names = {
        "STATUS": _enum(from_proto.ITEM_STATUS.values()),
        "ROLE": _enum(from_proto.ROLE.values()),
        "TEXTS": ts("{type: string, text: string}[]"),
        "PART": ts(
            "{type: 'output_text', text: string, annotations: array, logprobs: {token: string,"
            " logprob: number, bytes: integer[], top_logprobs?: array}[]}"
            " | {type: 'refusal', refusal: string}"
            " | {type: 'input_text' | 'reasoning_text', text: string}"
        ),
        "S": _enum(from_proto.status_name(v) for v in pb.ResponseStatus.values()),
        "MODES": _enum(from_proto.TOOL_CHOICE.values()),
        "B": builtin,
        "EVENTS": _enum(from_proto.EVENT_NAMES.values()),
    }
    item = [
        ts(f"{{id: string, type: '{kind}', status: STATUS, {rest}}}", **names)
        for kind, rest in OUTPUT_ITEMS.items()
    ]
    item.append(ts("{id: string, type: 'compaction', encrypted_content: string}"))
    response = ts(
        "{id: string, object: 'response', created_at: integer, status: S, completed_at: ?integer,"
        " error: ?{code: string, message: string}, incomplete_details: ?{reason: string},"
        " instructions: string|null, max_output_tokens: ?integer, model: string,"
        " output: $OutputItem[], parallel_tool_calls: boolean, previous_response_id: string|null,"
        " conversation?: ?{id: string}, reasoning: {effort?: string|null, summary?: string|null},"
        " service_tier?: string, store: boolean, temperature: number,"
        " text: {format: {type: string}},"
        " tool_choice: MODES | {type: 'function' | 'custom', name: string} | B,"
        " tools: ({type: string, name: string} | B)[], top_logprobs?: integer, top_p: number,"
        " truncation: string, usage: $Usage, user?: string|null, metadata: {[k]: string},"
        " background?: true}",
        **names,
    )
    event = ts(
        "{type: EVENTS, sequence_number: integer, response?: $Response, item?: $OutputItem,"
        " output_index?: integer, content_index?: integer, summary_index?: integer,"
        " item_id?: string, delta?: string, text?: string, input?: string,"
        " command_index?: integer, command?: string}",
        **names,
    )
    return {
        "OutputItem": {"anyOf": [*item, *builtin_items.item_schemas()]},
        "ItemList": ts(
            "{object: 'list', data: $OutputItem[], first_id: string|null,"
            " last_id: string|null, has_more: boolean}"
        ),
        "Conversation": ts(
            "{id: string, object: 'conversation', created_at: integer, metadata: {[k]: string}}"
        ),
        "DeletedConversation": ts("{id: string, object: 'conversation.deleted', deleted: boolean}"),
        "Usage": ts(
            "{input_tokens: integer, input_tokens_details: {cached_tokens: integer,"
            " cache_write_tokens?: integer}, output_tokens: integer, output_tokens_details:"
            " {reasoning_tokens: integer, accepted_prediction_tokens?: integer,"
            " rejected_prediction_tokens?: integer}, total_tokens?: integer}"
        ),
        "Response": response,
        "ResponseStreamEvent": event,
        "DeletedResponse": ts("{id: string, object: 'response', deleted: boolean}"),
        "InputTokens": ts("{object: 'response.input_tokens', input_tokens: integer}"),
        "Compaction": ts(
            "{id: string, object: 'response.compaction', created_at: integer, model: string,"
            " output: $OutputItem[], usage: $Usage}"
        ),
    }


def _enum(values: Any) -> Schema:
    return {"enum": sorted(set(values))}


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
