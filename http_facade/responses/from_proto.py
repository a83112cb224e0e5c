"""Encodes the core's proto messages as OpenAI Responses JSON (objects and SSE event payloads)."""

from __future__ import annotations

import json
from typing import Any

from mlx_responses.http_facade.responses import builtin_items
from mlx_responses.http_facade.responses.media_parts import media_to_json

from mlx_responses.v1 import events_pb2 as ev
from mlx_responses.v1 import responses_pb2 as pb


def status_name(status: int) -> str:
    """`completed`, `in_progress`, ...: the wire name of a ResponseStatus."""
    name = pb.ResponseStatus.Name(status).removeprefix("RESPONSE_STATUS_").lower()
    return "in_progress" if name == "unspecified" else name


ITEM_STATUS = {
    pb.ITEM_STATUS_IN_PROGRESS: "in_progress",
    pb.ITEM_STATUS_COMPLETED: "completed",
    pb.ITEM_STATUS_INCOMPLETE: "incomplete",
}
ROLE = {
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "assistant",
    pb.ROLE_SYSTEM: "system",
    pb.ROLE_DEVELOPER: "developer",
}
TOOL_CHOICE = {
    pb.TOOL_CHOICE_MODE_NONE: "none",
    pb.TOOL_CHOICE_MODE_AUTO: "auto",
    pb.TOOL_CHOICE_MODE_REQUIRED: "required",
}
EVENT_NAMES = {
    ev.EVENT_TYPE_RESPONSE_CREATED: "response.created",
    ev.EVENT_TYPE_RESPONSE_IN_PROGRESS: "response.in_progress",
    ev.EVENT_TYPE_RESPONSE_COMPLETED: "response.completed",
    ev.EVENT_TYPE_RESPONSE_INCOMPLETE: "response.incomplete",
    ev.EVENT_TYPE_RESPONSE_FAILED: "response.failed",
    ev.EVENT_TYPE_RESPONSE_QUEUED: "response.queued",
    ev.EVENT_TYPE_OUTPUT_ITEM_ADDED: "response.output_item.added",
    ev.EVENT_TYPE_OUTPUT_ITEM_DONE: "response.output_item.done",
    ev.EVENT_TYPE_CONTENT_PART_ADDED: "response.content_part.added",
    ev.EVENT_TYPE_CONTENT_PART_DONE: "response.content_part.done",
    ev.EVENT_TYPE_OUTPUT_TEXT_DELTA: "response.output_text.delta",
    ev.EVENT_TYPE_OUTPUT_TEXT_DONE: "response.output_text.done",
    ev.EVENT_TYPE_REASONING_TEXT_DELTA: "response.reasoning_text.delta",
    ev.EVENT_TYPE_REASONING_TEXT_DONE: "response.reasoning_text.done",
    ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA: "response.function_call_arguments.delta",
    ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE: "response.function_call_arguments.done",
    ev.EVENT_TYPE_COMPACTION_STARTED: "mlx.compaction.started",
    ev.EVENT_TYPE_COMPACTION_COMPLETED: "mlx.compaction.completed",
    ev.EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DELTA: "response.custom_tool_call_input.delta",
    ev.EVENT_TYPE_SHELL_CALL_COMMAND_ADDED: "response.shell_call_command.added",
    ev.EVENT_TYPE_SHELL_CALL_COMMAND_DELTA: "response.shell_call_command.delta",
    ev.EVENT_TYPE_SHELL_CALL_COMMAND_DONE: "response.shell_call_command.done",
    ev.EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DONE: "response.custom_tool_call_input.done",
    ev.EVENT_TYPE_REASONING_SUMMARY_PART_ADDED: "response.reasoning_summary_part.added",
    ev.EVENT_TYPE_REASONING_SUMMARY_PART_DONE: "response.reasoning_summary_part.done",
    ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DELTA: "response.reasoning_summary_text.delta",
    ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DONE: "response.reasoning_summary_text.done",
}
OPERATION_NAME = {v: k for k, v in builtin_items.OPERATIONS.items()}
PATCH_OUTPUT_NAME = {v: k for k, v in builtin_items.PATCH_OUTPUT.items()}
SHELL_COMMAND_EVENTS = (
    ev.EVENT_TYPE_SHELL_CALL_COMMAND_ADDED,
    ev.EVENT_TYPE_SHELL_CALL_COMMAND_DELTA,
    ev.EVENT_TYPE_SHELL_CALL_COMMAND_DONE,
)
# Summary text events carry the summary index where other text events carry content_index.
SUMMARY_TEXT = {
    ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DELTA,
    ev.EVENT_TYPE_REASONING_SUMMARY_TEXT_DONE,
}
# Deltas of a call's arguments (or custom input): no content_index.
CALL_DELTAS = {
    ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DELTA,
    ev.EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DELTA,
}


def logprobs_to_json(logprobs: Any) -> list[dict[str, Any]]:
    """Token logprobs as the OpenAI `logprobs` array."""
    return [
        {
            "token": lp.token,
            "logprob": lp.logprob,
            "bytes": list(lp.token_bytes),
            "top_logprobs": [
                {"token": t.token, "logprob": t.logprob, "bytes": list(t.token_bytes)}
                for t in lp.top_logprobs
            ],
        }
        for lp in logprobs
    ]


def part_to_json(part: pb.ContentPart) -> dict[str, Any]:
    """One content part."""
    kind = part.WhichOneof("part")
    if kind == "output_text":
        return {
            "type": "output_text",
            "text": part.output_text.text,
            "annotations": [],
            "logprobs": logprobs_to_json(part.output_text.logprobs),
        }
    if kind == "refusal":
        return {"type": "refusal", "refusal": part.refusal.refusal}
    if kind == "reasoning_text":
        return {"type": "reasoning_text", "text": part.reasoning_text.text}
    media = media_to_json(part)
    if media is not None:
        return media
    return {"type": "input_text", "text": part.input_text.text}


def item_to_json(item: pb.Item) -> dict[str, Any]:
    """One output (or replayable input) item."""
    kind = item.WhichOneof("item")
    if kind == "message":
        m = item.message
        out: dict[str, Any] = {
            "id": m.id,
            "type": "message",
            "status": ITEM_STATUS.get(m.status, "completed"),
            "role": ROLE.get(m.role, "assistant"),
            "content": [part_to_json(p) for p in m.content],
        }
        return out
    if kind == "function_call":
        f = item.function_call
        call = {
            "id": f.id,
            "type": "function_call",
            "status": ITEM_STATUS.get(f.status, "completed"),
            "call_id": f.call_id,
            "name": f.name,
            "arguments": f.arguments,
        }
        if f.HasField("namespace"):
            call["namespace"] = f.namespace
        return call
    if kind == "function_call_output":
        o = item.function_call_output
        return {
            "id": o.id,
            "type": "function_call_output",
            "status": ITEM_STATUS.get(o.status, "completed"),
            "call_id": o.call_id,
            "output": o.output,
        }
    if kind == "reasoning":
        r = item.reasoning
        reasoning = {
            "id": r.id,
            "type": "reasoning",
            "status": ITEM_STATUS.get(r.status, "completed"),
            "summary": [{"type": "summary_text", "text": s.text} for s in r.summary],
            "content": [{"type": "reasoning_text", "text": c.text} for c in r.content],
        }
        # Present only when there is some (OpenAI's and Open Responses' optional string: a
        # null fails Open Responses' schema).
        if r.HasField("encrypted_content"):
            reasoning["encrypted_content"] = r.encrypted_content
        return reasoning
    if kind == "custom_tool_call":
        ct = item.custom_tool_call
        custom = {
            "id": ct.id,
            "type": "custom_tool_call",
            "status": ITEM_STATUS.get(ct.status, "completed"),
            "call_id": ct.call_id,
            "name": ct.name,
            "input": ct.input,
        }
        if ct.HasField("namespace"):
            custom["namespace"] = ct.namespace
        return custom
    if kind == "custom_tool_call_output":
        co = item.custom_tool_call_output
        return {
            "id": co.id,
            "type": "custom_tool_call_output",
            "status": ITEM_STATUS.get(co.status, "completed"),
            "call_id": co.call_id,
            "output": co.output,
        }
    builtin = builtin_item_to_json(item)
    if builtin is not None:
        return builtin
    if kind == "compaction_trigger":
        return {"type": "compaction_trigger"}
    if kind == "item_reference":
        return {"id": item.item_reference.id, "type": "item_reference"}
    c = item.compaction
    return {"id": c.id, "type": "compaction", "encrypted_content": c.encrypted_content}


def tool_to_json(tool: pb.Tool) -> dict[str, Any]:
    """A tool (the core echoes function tools; the others only reach here from gRPC clients)."""
    kind = tool.WhichOneof("tool")
    if kind == "hosted":
        return {"type": tool.hosted.type}
    builtin = builtin_tool_to_json(tool)
    if builtin is not None:
        return builtin
    if kind == "custom":
        custom = tool.custom
        fmt: dict[str, Any] = {"type": "text"}
        if custom.WhichOneof("format") == "grammar":
            fmt = {
                "type": "grammar",
                "syntax": custom.grammar.syntax,
                "definition": custom.grammar.definition,
            }
        return {
            "type": "custom",
            "name": custom.name,
            "description": custom.description if custom.HasField("description") else None,
            "format": fmt,
        }
    if kind == "namespace":
        ns = tool.namespace
        return {
            "type": "namespace",
            "name": ns.name,
            "description": ns.description if ns.HasField("description") else "",
            "tools": [tool_to_json(t) for t in ns.tools],
        }
    fn = tool.function
    return {
        "type": "function",
        "name": fn.name,
        "description": fn.description if fn.HasField("description") else None,
        "parameters": json.loads(fn.parameters_json) if fn.parameters_json else None,
        "strict": fn.strict if fn.HasField("strict") else None,
    }


def _custom_names(tools: Any) -> set[str]:
    names = set()
    for tool in tools:
        kind = tool.WhichOneof("tool")
        if kind == "custom":
            names.add(tool.custom.name)
        elif kind == "namespace":
            names |= _custom_names(tool.namespace.tools)
    return names


def tool_choice_to_json(choice: pb.ToolChoice, tools: Any = ()) -> Any:
    """`"auto"`, `"none"`, `"required"`, a named function or custom tool, or allowed tools."""
    kind = choice.WhichOneof("choice")
    if kind == "function_name":
        return {"type": "function", "name": choice.function_name}
    if kind == "custom_name":
        return {"type": "custom", "name": choice.custom_name}
    if kind == "builtin_type":
        return {"type": choice.builtin_type}
    if kind == "allowed_tools":
        allowed = choice.allowed_tools
        custom = _custom_names(tools)
        builtin = {tool.WhichOneof("tool") for tool in tools} & set(builtin_items.TOOL_TYPES)
        return {
            "type": "allowed_tools",
            "mode": TOOL_CHOICE.get(allowed.mode, "auto"),
            "tools": [
                {"type": name}
                if name in builtin
                else {"type": "custom" if name in custom else "function", "name": name}
                for name in allowed.names
            ],
        }
    return TOOL_CHOICE.get(choice.mode, "auto")


def text_to_json(text: pb.TextConfig) -> dict[str, Any]:
    """The `text` configuration."""
    kind = text.WhichOneof("format")
    fmt: dict[str, Any]
    if kind == "json_schema":
        js = text.json_schema
        fmt = {
            "type": "json_schema",
            "name": js.name,
            "schema": json.loads(js.schema_json),
            "description": js.description if js.HasField("description") else None,
            "strict": js.strict if js.HasField("strict") else None,
        }
    elif kind == "json_object":
        fmt = {"type": "json_object"}
    else:
        fmt = {"type": "text"}
    return {"format": fmt, "verbosity": text.verbosity if text.HasField("verbosity") else "medium"}


def usage_to_json(usage: pb.Usage) -> dict[str, Any]:
    """Token usage with its details."""
    output_details: dict[str, int] = {"reasoning_tokens": usage.reasoning_tokens}
    if usage.draft_tokens:
        # Speculative decoding's drafts, by OpenAI's Predicted Outputs names (chat's too); only
        # when it drafted, so a response keeps OpenAI's own shape otherwise.
        output_details["accepted_prediction_tokens"] = usage.accepted_draft_tokens
        output_details["rejected_prediction_tokens"] = (
            usage.draft_tokens - usage.accepted_draft_tokens
        )
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": output_details,
        "total_tokens": usage.total_tokens,
    }


def _opt(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _outcome_json(outcome: pb.ShellCallOutcome) -> dict[str, Any]:
    if outcome.WhichOneof("outcome") == "timeout":
        return {"type": "timeout"}
    return {"type": "exit", "exit_code": outcome.exit_code}


def builtin_item_to_json(item: pb.Item) -> dict[str, Any] | None:
    """A built-in call or output item as its JSON; None for any other item."""
    kind = item.WhichOneof("item")
    if kind not in builtin_items.ITEM_TYPES:
        return None
    message = getattr(item, kind)
    out: dict[str, Any] = {"id": message.id, "type": kind, "call_id": message.call_id}
    if kind == "shell_call":
        action = message.action
        out["action"] = {
            "commands": list(action.commands),
            "timeout_ms": _opt(action, "timeout_ms"),
            "max_output_length": _opt(action, "max_output_length"),
        }
        out["environment"] = None
    elif kind == "shell_call_output":
        out["output"] = [
            {"stdout": e.stdout, "stderr": e.stderr, "outcome": _outcome_json(e.outcome)}
            for e in message.output
        ]
        out["max_output_length"] = _opt(message, "max_output_length")
    elif kind == "local_shell_call":
        action = message.action
        out["action"] = {
            "type": "exec",
            "command": list(action.command),
            "env": dict(action.env),
            "timeout_ms": _opt(action, "timeout_ms"),
            "user": _opt(action, "user"),
            "working_directory": _opt(action, "working_directory"),
        }
    elif kind == "local_shell_call_output":
        out["output"] = message.output
    elif kind == "apply_patch_call":
        op = message.operation
        operation: dict[str, Any] = {"type": OPERATION_NAME.get(op.type), "path": op.path}
        if op.HasField("diff"):
            operation["diff"] = op.diff
        out["operation"] = operation
    else:
        out["status"] = PATCH_OUTPUT_NAME.get(message.status, "completed")
        out["output"] = _opt(message, "output")
        return out
    out["status"] = ITEM_STATUS.get(message.status, "completed")
    return out


def builtin_tool_to_json(tool: pb.Tool) -> dict[str, Any] | None:
    """A built-in tool as offered; None for any other tool."""
    kind = tool.WhichOneof("tool")
    if kind == "shell":
        return {"type": "shell", "environment": {"type": "local"}}
    if kind in builtin_items.TOOL_TYPES:
        return {"type": kind}
    return None


def shell_command_event(event: ev.ResponseEvent) -> dict[str, Any]:
    """The fields of a `response.shell_call_command.*` event (its command's index in
    `content_index`)."""
    if event.type == ev.EVENT_TYPE_SHELL_CALL_COMMAND_DELTA:
        d = event.text_delta
        return {"output_index": d.output_index, "command_index": d.content_index, "delta": d.delta}
    t = event.text_done
    return {"output_index": t.output_index, "command_index": t.content_index, "command": t.text}


def response_to_json(r: pb.Response) -> dict[str, Any]:
    """The whole Response resource; `background` only on background responses (seed)."""
    out: dict[str, Any] = {
        "id": r.id,
        "object": "response",
        "created_at": r.created_at,
        "status": status_name(r.status),
        "completed_at": _opt(r, "completed_at"),
        "error": {"code": r.error.code, "message": r.error.message}
        if r.HasField("error")
        else None,
        "incomplete_details": {"reason": r.incomplete_details.reason}
        if r.HasField("incomplete_details")
        else None,
        "instructions": _opt(r, "instructions"),
        "max_output_tokens": _opt(r, "max_output_tokens"),
        "max_tool_calls": None,
        "model": r.model,
        "output": [item_to_json(i) for i in r.output],
        "parallel_tool_calls": r.parallel_tool_calls,
        "presence_penalty": r.presence_penalty,
        "frequency_penalty": r.frequency_penalty,
        "previous_response_id": _opt(r, "previous_response_id"),
        "conversation": {"id": r.conversation} if r.HasField("conversation") else None,
        "prompt": None,
        "prompt_cache_key": _opt(r, "prompt_cache_key"),
        "reasoning": {
            "effort": _opt(r.reasoning, "effort"),
            "summary": _opt(r.reasoning, "summary"),
        },
        "safety_identifier": _opt(r, "safety_identifier"),
        "service_tier": r.service_tier or "default",
        "store": r.store,
        "temperature": r.temperature,
        "text": text_to_json(r.text),
        "tool_choice": tool_choice_to_json(r.tool_choice, r.tools),
        "tools": [tool_to_json(t) for t in r.tools],
        "top_logprobs": r.top_logprobs,
        "top_p": r.top_p,
        "truncation": r.truncation or "disabled",
        "usage": usage_to_json(r.usage),
        "user": _opt(r, "user"),
        "metadata": dict(r.metadata),
    }
    if r.background:
        out["background"] = True
    return out


def event_to_json(event: ev.ResponseEvent) -> dict[str, Any]:
    """One streaming event as its SSE `data` payload (with `type` and `sequence_number`)."""
    name = EVENT_NAMES[event.type]
    out: dict[str, Any] = {"type": name, "sequence_number": event.sequence_number}
    kind = event.WhichOneof("payload")
    if kind == "snapshot":
        out["response"] = response_to_json(event.snapshot.response)
    elif kind == "output_item":
        out["output_index"] = event.output_item.output_index
        out["item"] = item_to_json(event.output_item.item)
    elif kind == "content_part":
        p = event.content_part
        out.update(
            item_id=p.item_id,
            output_index=p.output_index,
            content_index=p.content_index,
            part=part_to_json(p.part),
        )
    elif event.type in SHELL_COMMAND_EVENTS:
        out.update(shell_command_event(event))
    elif kind == "text_delta":
        d = event.text_delta
        out.update(item_id=d.item_id, output_index=d.output_index)
        if event.type in SUMMARY_TEXT:
            out["summary_index"] = d.content_index
        elif event.type not in CALL_DELTAS:
            out["content_index"] = d.content_index
        out["delta"] = d.delta
        if event.type == ev.EVENT_TYPE_OUTPUT_TEXT_DELTA:
            out["logprobs"] = logprobs_to_json(d.logprobs)
    elif kind == "text_done":
        d = event.text_done
        out.update(item_id=d.item_id, output_index=d.output_index)
        if event.type == ev.EVENT_TYPE_FUNCTION_CALL_ARGUMENTS_DONE:
            out["name"] = d.name
            out["arguments"] = d.text
        elif event.type == ev.EVENT_TYPE_CUSTOM_TOOL_CALL_INPUT_DONE:
            out["input"] = d.text
        elif event.type in SUMMARY_TEXT:
            out["summary_index"] = d.content_index
            out["text"] = d.text
        else:
            out["content_index"] = d.content_index
            out["text"] = d.text
            if event.type == ev.EVENT_TYPE_OUTPUT_TEXT_DONE:
                out["logprobs"] = logprobs_to_json(d.logprobs)
    elif kind == "summary_part":
        sp = event.summary_part
        out.update(
            item_id=sp.item_id,
            output_index=sp.output_index,
            summary_index=sp.summary_index,
            part={"type": "summary_text", "text": sp.part.text},
        )
    elif kind == "compaction_started":
        out.update(
            response_id=event.compaction_started.response_id,
            input_tokens=event.compaction_started.input_tokens,
        )
    elif kind == "compaction_completed":
        c = event.compaction_completed
        out.update(
            response_id=c.response_id,
            input_tokens_before=c.input_tokens_before,
            input_tokens_after=c.input_tokens_after,
        )
    return out
