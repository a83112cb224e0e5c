"""Hosted and namespace tools: refused (seed) or dropped and flattened (`--hosted-tools drop`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from mlx_responses.service.errors import invalid

from mlx_responses.v1 import responses_pb2 as pb

log = logging.getLogger(__name__)

NAMESPACE_SEPARATOR = "__"
# Tools the client runs, which reach the model (built-in ones lowered: responses/builtin_tools).
CLIENT_TOOLS = ("function", "custom", "shell", "local_shell", "apply_patch")


def qualified_name(namespace: str, name: str) -> str:
    """`name` prefixed with its namespace (Codex's `mcp__server__tool` style)."""
    if namespace.endswith(NAMESPACE_SEPARATOR):
        return f"{namespace}{name}"
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}"


@dataclass(frozen=True)
class ResolvedTools:
    """A request whose tools are all function tools, and where namespaced ones came from."""

    params: pb.CreateResponseParams
    # flat name the model sees -> (namespace, name inside it)
    namespaced: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # custom tools (shown to the model as functions) by the name the model sees
    custom: Mapping[str, pb.CustomTool] = field(default_factory=dict)
    # built-in client tools (shell, local_shell, apply_patch) by the name the model sees
    builtin: Mapping[str, str] = field(default_factory=dict)


@dataclass
class HostedToolPolicy:
    """Applies `--hosted-tools` to a request before it is validated or rendered."""

    mode: str = "reject"
    _logged: set[str] = field(default_factory=set)

    def resolve(self, params: pb.CreateResponseParams) -> ResolvedTools:
        """The request with function tools only; a 400 for hosted tools in `reject` mode."""
        kinds = [tool.WhichOneof("tool") for tool in params.tools]
        if all(kind in CLIENT_TOOLS for kind in kinds):
            return ResolvedTools(params)
        tools: list[pb.Tool] = []
        namespaced: dict[str, tuple[str, str]] = {}
        aliases: dict[str, str] = {}
        taken = {_tool_name(t) for t in params.tools if t.WhichOneof("tool") != "namespace"}
        for i, tool in enumerate(params.tools):
            kind = tool.WhichOneof("tool")
            if kind in CLIENT_TOOLS:
                tools.append(tool)
            elif kind == "hosted":
                self._drop(tool.hosted.type, f"tools[{i}].type")
            elif kind == "namespace":
                self._flatten(
                    tool.namespace, f"tools[{i}]", tools, namespaced, taken, aliases=aliases
                )
            else:
                raise invalid("Each tool needs a 'type'.", f"tools[{i}].type", "invalid_value")
        resolved = pb.CreateResponseParams()
        resolved.CopyFrom(params)
        del resolved.tools[:]
        resolved.tools.extend(tools)
        _rename_choice(resolved.tool_choice, aliases)
        return ResolvedTools(resolved, namespaced)

    def _drop(self, kind: str, param: str) -> None:
        if self.mode != "drop":
            raise invalid(
                f"Tool type '{kind}' is not supported: this server runs function tools only "
                "(start it with --hosted-tools drop to ignore hosted tools).",
                param,
                "unsupported_tool",
            )
        if kind not in self._logged:
            self._logged.add(kind)
            log.info("dropping hosted tool type '%s' (--hosted-tools drop; logged once)", kind)

    def _flatten(
        self,
        namespace: pb.NamespaceTool,
        param: str,
        tools: list[pb.Tool],
        namespaced: dict[str, tuple[str, str]],
        taken: set[str],
        *,
        aliases: dict[str, str],
    ) -> None:
        if self.mode != "drop":
            raise invalid(
                "Tool type 'namespace' is not supported: this server runs function tools only "
                "(start it with --hosted-tools drop to flatten namespaces).",
                f"{param}.type",
                "unsupported_tool",
            )
        if not namespace.name:
            raise invalid("Namespace tools need a 'name'.", f"{param}.name")
        for j, inner in enumerate(namespace.tools):
            kind = inner.WhichOneof("tool")
            if kind == "hosted":
                self._drop(inner.hosted.type, f"{param}.tools[{j}].type")
                continue
            if kind not in ("function", "custom"):
                raise invalid(
                    "A namespace holds function and custom tools only.",
                    f"{param}.tools[{j}].type",
                    "invalid_value",
                )
            name = _tool_name(inner)
            qualified = qualified_name(namespace.name, name)
            # The model sees the function's own name (small models copy names they know);
            # only a clash with another tool falls back to the qualified name.
            shown = name if name not in taken else qualified
            taken.add(shown)
            flat = pb.Tool()
            flat.CopyFrom(inner)
            spec = flat.custom if kind == "custom" else flat.function
            spec.name = shown
            if not spec.HasField("description") and namespace.HasField("description"):
                spec.description = namespace.description
            namespaced[shown] = (namespace.name, name)
            if qualified not in taken:
                namespaced[qualified] = (namespace.name, name)  # a model may call it qualified
                aliases[qualified] = shown  # and a tool_choice may name it qualified
            tools.append(flat)


def _tool_name(tool: pb.Tool) -> str:
    return tool.custom.name if tool.WhichOneof("tool") == "custom" else tool.function.name


def _rename_choice(choice: pb.ToolChoice, aliases: Mapping[str, str]) -> None:
    """Points a tool_choice naming a namespaced function qualified at the name the model sees.

    The Responses API's function choice carries a bare `name`: a function's own name picks
    it (a top-level tool of that name wins), `namespace__name` always picks the namespaced one.
    """
    kind = choice.WhichOneof("choice")
    if kind == "function_name":
        choice.function_name = aliases.get(choice.function_name, choice.function_name)
    elif kind == "custom_name":
        choice.custom_name = aliases.get(choice.custom_name, choice.custom_name)
    elif kind == "allowed_tools":
        names = [aliases.get(n, n) for n in choice.allowed_tools.names]
        del choice.allowed_tools.names[:]
        choice.allowed_tools.names.extend(names)
