"""Built-in client tools (`shell`, `local_shell`, `apply_patch`) lowered to the tools the model
knows: the shell tools become function tools, `apply_patch` a custom tool under the one-file
patch grammar (service/text/builtin_tools.py). Runs before custom tools are lowered, so the
patch tool then takes the custom tools' path to the model; `builtin` remembers which names
stand for a built-in, so their calls leave as typed items (service/responses/events.py).
"""

from __future__ import annotations

import json
from dataclasses import replace

from mlx_responses.service.errors import invalid
from mlx_responses.service.responses.tool_policy import ResolvedTools
from mlx_responses.service.text import builtin_tools as bt

from mlx_responses.v1 import responses_pb2 as pb


def model_tool(kind: str) -> pb.Tool:
    """The function (or custom) tool the model is shown for built-in `kind`."""
    if kind == bt.APPLY_PATCH:
        grammar = pb.CustomToolGrammar(syntax="lark", definition=bt.PATCH_GRAMMAR)
        custom = pb.CustomTool(
            name=bt.APPLY_PATCH, description=bt.APPLY_PATCH_DESCRIPTION, grammar=grammar
        )
        return pb.Tool(custom=custom)
    if kind == bt.SHELL:
        description, parameters = bt.SHELL_DESCRIPTION, bt.SHELL_PARAMETERS
    else:
        description, parameters = bt.LOCAL_SHELL_DESCRIPTION, bt.LOCAL_SHELL_PARAMETERS
    fn = pb.FunctionTool(name=kind, description=description, parameters_json=json.dumps(parameters))
    return pb.Tool(function=fn)


def _name(tool: pb.Tool) -> str:
    kind = tool.WhichOneof("tool")
    return tool.custom.name if kind == "custom" else tool.function.name


def lower(resolved: ResolvedTools) -> ResolvedTools:
    """The request with each built-in tool as the tool the model sees; `builtin` names them.

    A `tool_choice` naming a built-in forces a call of it; naming one not offered is a 400.
    """
    params = resolved.params
    choice = params.tool_choice
    named = choice.builtin_type if choice.WhichOneof("choice") == "builtin_type" else None
    kinds = [bt.tool_kind(tool) for tool in params.tools]
    if named is not None and named not in kinds:
        raise invalid(
            f"tool_choice names the built-in tool '{named}', which is not in 'tools'.",
            "tool_choice",
        )
    if not any(kinds):
        return resolved
    lowered = pb.CreateResponseParams()
    lowered.CopyFrom(params)
    del lowered.tools[:]
    builtin: dict[str, str] = {}
    others = {_name(tool) for tool, kind in zip(params.tools, kinds, strict=True) if not kind}
    for i, (tool, kind) in enumerate(zip(params.tools, kinds, strict=True)):
        if kind is None:
            lowered.tools.append(tool)
            continue
        if kind in builtin or kind in others:
            raise invalid(
                f"The built-in tool '{kind}' is offered twice, or beside a tool of its name.",
                f"tools[{i}].type",
                "invalid_value",
            )
        builtin[kind] = kind
        lowered.tools.append(model_tool(kind))
    if named == bt.APPLY_PATCH:
        lowered.tool_choice.custom_name = named
    elif named is not None:
        lowered.tool_choice.function_name = named
    return replace(resolved, params=lowered, builtin=builtin)
