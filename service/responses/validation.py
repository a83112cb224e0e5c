"""Checks a create request's values before anything is generated or stored."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from mlx_responses.service.errors import invalid
from mlx_responses.service.limits import (
    MAX_COMPACT_THRESHOLD,
    MAX_STOP_SEQUENCES,
    MAX_TOP_LOGPROBS,
    REASONING_SUMMARIES,
)
from mlx_responses.service.models.pool import check_model
from mlx_responses.service.text.grammars import SchemaError, check_strict
from mlx_responses.service.text.json_text import JsonBoundsError, loads_bounded
from mlx_responses.service.text.request_json import JsonObject, RequestJson

from mlx_responses.v1 import responses_pb2 as pb


def parse_json_object(text: str, param: str) -> dict[str, Any]:
    """A JSON object from text, or a 400 naming `param`."""
    try:
        value = loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise invalid(f"'{param}' is not valid JSON: {exc.msg}", param) from exc
    if not isinstance(value, dict):
        raise invalid(f"'{param}' must be a JSON object", param)
    return value


def check_arguments(items: Sequence[pb.Item]) -> None:
    """Function-call arguments that are JSON must be within the decoder's bounds.

    Malformed arguments stay allowed (they render as text); JSON past the bounds is a 400.
    """
    for i, item in enumerate(items):
        if item.WhichOneof("item") == "function_call":
            try:
                loads_bounded(item.function_call.arguments)
            except JsonBoundsError as exc:
                raise invalid(
                    f"'input[{i}].arguments' is refused: {exc.msg}.", f"input[{i}].arguments"
                ) from exc
            except json.JSONDecodeError:
                continue


CLIENT_TEMPLATE_KEY = "chat_template"


def check_client_template(parsed: RequestJson, allowed: bool) -> None:
    """A template of the client's own (`chat_template_kwargs.chat_template`) needs the flag."""
    if not allowed and CLIENT_TEMPLATE_KEY in parsed.template_kwargs:
        raise invalid(
            "This server does not accept a client chat template "
            "(`chat_template_kwargs.chat_template`); it renders with the model's own.",
            f"chat_template_kwargs.{CLIENT_TEMPLATE_KEY}",
            "unsupported_parameter",
        )


def template_kwargs(params: pb.CreateResponseParams) -> dict[str, Any]:
    """The request's extra chat-template kwargs (a 400 if they are not a JSON object)."""
    if params.HasField("chat_template_kwargs_json"):
        return parse_json_object(params.chat_template_kwargs_json, "chat_template_kwargs")
    return {}


def validate_params(
    params: pb.CreateResponseParams, model_accepts: Callable[[str], bool]
) -> RequestJson:
    """Raises ServiceError for the first problem found, with the OpenAI `param`.

    Returns the request's JSON-in-strings, parsed (each once).
    """
    check_model(params.model, model_accepts)
    if params.HasField("prompt"):
        _validate_raw_prompt(params)
    elif not params.input:
        raise invalid("'input' must not be empty.", "input")
    check_arguments(params.input)
    for i, item in enumerate(params.input):
        if item.WhichOneof("item") == "compaction_trigger":
            # Only the last item of a create is a trigger (responses/compaction_trigger.py).
            if params.background and i == len(params.input) - 1:
                raise invalid(
                    "'background' is not supported with a 'compaction_trigger' item: "
                    "nothing is stored, so there is nothing to poll.",
                    "background",
                )
            raise invalid(
                "A 'compaction_trigger' item must be the last input item of a foreground "
                "/v1/responses request.",
                f"input[{i}].type",
                "invalid_value",
            )
    if len(params.stop) > MAX_STOP_SEQUENCES or any(not s for s in params.stop):
        raise invalid(
            f"Invalid 'stop': at most {MAX_STOP_SEQUENCES} sequences, none of them empty.",
            "stop",
            "invalid_value",
        )
    if params.HasField("reasoning_budget") and params.reasoning_budget < 0:
        raise invalid(
            f"Invalid 'reasoning_budget': {params.reasoning_budget}; must be at least 0.",
            "reasoning_budget",
            "invalid_value",
        )
    if params.HasField("top_k") and params.top_k < 0:
        raise invalid(
            f"Invalid 'top_k': {params.top_k}; must be at least 0.", "top_k", "invalid_value"
        )
    if params.HasField("temperature") and not 0.0 <= params.temperature <= 2.0:
        raise invalid(
            f"Invalid 'temperature': {params.temperature}; must be between 0 and 2.",
            "temperature",
            "invalid_value",
        )
    if params.HasField("top_p") and not 0.0 <= params.top_p <= 1.0:
        raise invalid(
            f"Invalid 'top_p': {params.top_p}; must be between 0 and 1.",
            "top_p",
            "invalid_value",
        )
    for name in ("presence_penalty", "frequency_penalty"):
        if params.HasField(name) and not -2.0 <= getattr(params, name) <= 2.0:
            raise invalid(
                f"Invalid '{name}': {getattr(params, name)}; must be between -2 and 2.",
                name,
                "invalid_value",
            )
    if params.HasField("max_output_tokens") and params.max_output_tokens < 1:
        raise invalid(
            f"Invalid 'max_output_tokens': {params.max_output_tokens}; must be at least 1.",
            "max_output_tokens",
            "invalid_value",
        )
    if params.HasField("top_logprobs") and not 0 <= params.top_logprobs <= MAX_TOP_LOGPROBS:
        raise invalid(
            f"Invalid 'top_logprobs': {params.top_logprobs}; must be between 0 and 20.",
            "top_logprobs",
            "invalid_value",
        )
    if params.HasField("truncation") and params.truncation != "disabled":
        raise invalid(
            f"Unsupported 'truncation': '{params.truncation}'; only 'disabled' is supported.",
            "truncation",
            "unsupported_value",
        )
    if params.HasField("previous_response_id") and params.HasField("conversation"):
        raise invalid(
            "'previous_response_id' and 'conversation' cannot be used together.",
            "previous_response_id",
        )
    tool_parameters = _validate_tools(params)
    answer_schema = _validate_text(params)
    summary = params.reasoning.summary
    if params.reasoning.HasField("summary") and summary not in REASONING_SUMMARIES:
        raise invalid(
            f"Invalid 'reasoning.summary' {summary!r}: expected one of auto, concise, detailed.",
            "reasoning.summary",
            "invalid_value",
        )
    for i, entry in enumerate(params.context_management):
        if entry.type != "compaction":
            raise invalid(
                f"Unsupported context_management type '{entry.type}'.",
                f"context_management[{i}].type",
            )
        if not entry.HasField("compact_threshold") or not (
            1 <= entry.compact_threshold <= MAX_COMPACT_THRESHOLD
        ):
            raise invalid(
                "'compact_threshold' must be between 1 and 100000000.",
                f"context_management[{i}].compact_threshold",
            )
    return RequestJson(
        template_kwargs=template_kwargs(params),
        answer_schema=answer_schema,
        tool_parameters=tool_parameters,
    )


def _validate_raw_prompt(params: pb.CreateResponseParams) -> None:
    """A legacy completions prompt is the whole prompt: nothing else renders into it."""
    if not params.prompt:
        raise invalid("'prompt' must not be empty.", "prompt")
    for name in ("previous_response_id", "conversation", "instructions"):
        if params.HasField(name):
            raise invalid(f"'{name}' cannot be used with a raw 'prompt'.", name)
    if params.input or params.tools:
        raise invalid("'input' and 'tools' cannot be used with a raw 'prompt'.", "prompt")


def _validate_tools(params: pb.CreateResponseParams) -> dict[str, JsonObject]:
    """Each function tool's parameters, parsed."""
    parameters: dict[str, JsonObject] = {}
    names = set()
    for i, tool in enumerate(params.tools):
        if tool.WhichOneof("tool") != "function":
            # Hosted and namespace tools are resolved first (service/tool_policy.py).
            raise invalid("Only function tools can be offered here.", f"tools[{i}].type")
        fn = tool.function
        if not fn.name:
            raise invalid("Function tools need a 'name'.", f"tools[{i}].name")
        if fn.name in names:
            raise invalid(f"Duplicate tool name '{fn.name}'.", f"tools[{i}].name")
        names.add(fn.name)
        parameters[fn.name] = (
            parse_json_object(fn.parameters_json, f"tools[{i}].parameters")
            if fn.parameters_json
            else {}
        )
        if fn.HasField("strict") and fn.strict:
            _check_strict(
                parameters[fn.name],
                f"Invalid schema for function '{fn.name}' (strict)",
                f"tools[{i}].parameters",
                "invalid_function_parameters",
            )
    choice = params.tool_choice
    kind = choice.WhichOneof("choice")
    if kind == "function_name" and choice.function_name not in names:
        raise invalid(
            f"tool_choice names the function '{choice.function_name}', which is not in 'tools'.",
            "tool_choice",
        )
    if kind == "allowed_tools":
        allowed = choice.allowed_tools
        if not allowed.names:
            raise invalid(
                "tool_choice 'allowed_tools' needs at least one tool.", "tool_choice.tools"
            )
        for i, name in enumerate(allowed.names):
            if name not in names:
                raise invalid(
                    f"tool_choice allows the function '{name}', which is not in 'tools'.",
                    f"tool_choice.tools[{i}].name",
                )
    if kind == "mode" and choice.mode == pb.TOOL_CHOICE_MODE_REQUIRED and not names:
        raise invalid("tool_choice 'required' needs at least one tool.", "tool_choice")
    return parameters


def _validate_text(params: pb.CreateResponseParams) -> JsonObject | None:
    """The schema the answer must follow (`text.format`), parsed; None for plain text."""
    kind = params.text.WhichOneof("format")
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        return None
    fmt = params.text.json_schema
    if not fmt.name:
        raise invalid("'text.format.name' is required for json_schema.", "text.format.name")
    schema = parse_json_object(fmt.schema_json, "text.format.schema")
    if fmt.HasField("strict") and fmt.strict:
        _check_strict(
            schema,
            "Invalid JSON schema in 'text.format.schema' (strict)",
            "text.format.schema",
            "invalid_json_schema",
        )
    return schema


def _check_strict(schema: JsonObject, what: str, param: str, code: str) -> None:
    """A `strict` schema must be enforceable whole: elsewhere what the grammar compiler does not
    implement is left unenforced (service/text/grammars.py)."""
    try:
        check_strict(schema)
    except SchemaError as exc:
        raise invalid(f"{what}: {exc}", param, code) from exc
