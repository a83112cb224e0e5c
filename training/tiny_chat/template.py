"""ChatML / Qwen3-style chat template of the tiny chat model, plus its fixed text pieces."""

from __future__ import annotations

from typing import Any

TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments"
    " within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

# Rendered by transformers' apply_chat_template (jinja2 sandbox, with its ``tojson`` filter, which
# is ``json.dumps`` with default separators and ensure_ascii=False).
#  - ``developer`` renders like ``system``; the first system/developer message is merged with the
#    tools section when ``tools`` is given.
#  - tools may be in the chat-completions shape ({"type": "function", "function": {...}}) or flat
#    ({"type": "function", "name": ..., "parameters": ...}); both render as the nested shape with
#    exactly the keys name, description, parameters.
#  - content may be a string, null, or a list of parts with a ``text`` field.
#  - assistant ``reasoning_content`` (or an inline ``<think>...</think>`` prefix) renders as a
#    think block; ``tool_calls`` render as Qwen3 <tool_call> JSON blocks; consecutive ``tool``
#    messages are grouped into one user turn of <tool_response> blocks.
#  - the generation prompt is ``<|im_start|>assistant\n``, followed by ``<think>\n`` only when
#    ``enable_thinking`` is true.
CHAT_TEMPLATE = (
    """{%- macro render_content(content) -%}
{%- if content is string -%}
{{- content -}}
{%- elif content is none or content is undefined -%}
{%- elif content is mapping -%}
{%- if content.text is defined -%}{{- content.text -}}{%- endif -%}
{%- elif content is iterable -%}
{%- for part in content -%}
{%- if part is string -%}{{- part -}}
{%- elif part.text is defined and part.text is not none -%}{{- part.text -}}
{%- endif -%}
{%- endfor -%}
{%- else -%}
{{- content -}}
{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(start=0) -%}
{%- if messages and messages[0].role in ['system', 'developer'] -%}
{%- set ns.start = 1 -%}
{%- endif -%}
{%- if tools -%}
{{- '<|im_start|>system\\n' -}}
{%- if ns.start == 1 -%}
{{- render_content(messages[0].content) + '\\n\\n' -}}
{%- endif -%}
{{- '"""
    + TOOLS_HEADER.replace("\n", "\\n")
    + """' -}}
{%- for tool in tools -%}
{%- set fn = tool.function if tool.function is defined else tool -%}
{%- set params = fn.parameters if fn.parameters is defined and fn.parameters is not none"""
    + """ else {'type': 'object', 'properties': {}} -%}
{%- set desc = fn.description if fn.description is defined and fn.description is not none"""
    + """ else '' -%}
{{- '\\n' -}}
{{- {'type': 'function', 'function': {'name': fn.name, 'description': desc,"""
    + """ 'parameters': params}} | tojson -}}
{%- endfor -%}
{{- '"""
    + TOOLS_FOOTER.replace("\n", "\\n")
    + """<|im_end|>\\n' -}}
{%- elif ns.start == 1 -%}
{{- '<|im_start|>system\\n' + render_content(messages[0].content) + '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if loop.index0 >= ns.start -%}
{%- set content = render_content(message.content) -%}
{%- if message.role in ['system', 'developer'] -%}
{{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' -}}
{%- elif message.role == 'user' -%}
{{- '<|im_start|>user\\n' + content + '<|im_end|>\\n' -}}
{%- elif message.role == 'assistant' -%}
{%- set reasoning = '' -%}
{%- if message.reasoning_content is string and message.reasoning_content -%}
{%- set reasoning = message.reasoning_content -%}
{%- elif message.reasoning is string and message.reasoning -%}
{%- set reasoning = message.reasoning -%}
{%- elif '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}
{%- set content = content.split('</think>')[-1] -%}
{%- endif -%}
{%- set reasoning = reasoning.strip('\\n') -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if reasoning -%}
{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' + content.lstrip('\\n') -}}
{%- else -%}
{{- content -}}
{%- endif -%}
{%- if message.tool_calls -%}
{%- for tool_call in message.tool_calls -%}
{%- if (loop.first and content) or (not loop.first) -%}{{- '\\n' -}}{%- endif -%}
{%- if tool_call.function -%}{%- set tool_call = tool_call.function -%}{%- endif -%}
{{- '<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' -}}
{%- if tool_call.arguments is string -%}
{{- tool_call.arguments -}}
{%- else -%}
{{- (tool_call.arguments if tool_call.arguments is not none else {}) | tojson -}}
{%- endif -%}
{{- '}\\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.index0 == ns.start or messages[loop.index0 - 1].role != 'tool' -%}
{{- '<|im_start|>user' -}}
{%- endif -%}
{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}
{{- '<|im_end|>\\n' -}}
{%- endif -%}
{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if enable_thinking is defined and enable_thinking -%}
{{- '<think>\\n' -}}
{%- endif -%}
{%- endif -%}"""
)


def compile_template() -> Any:
    """The chat template compiled exactly as transformers compiles it (same env and filters)."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(CHAT_TEMPLATE)


def render(
    template: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
    enable_thinking: bool | None = None,
) -> str:
    """Render ``messages`` with a compiled template, as ``apply_chat_template`` would."""
    kwargs: dict[str, Any] = {}
    if enable_thinking is not None:
        kwargs["enable_thinking"] = enable_thinking
    return template.render(
        messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs
    )
