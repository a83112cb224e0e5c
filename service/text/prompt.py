"""Turns Responses items into chat-template messages and renders them to prompt tokens."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlx_responses.service.ids import OWNER
from mlx_responses.service.text.builtin_tools import model_item
from mlx_responses.service.text.compaction_items import decode_compaction, effective_items
from mlx_responses.service.text.json_text import loads_bounded
from mlx_responses.service.text.prompt_tokens import data_texts, encode_prompt
from mlx_responses.service.text.reasoning_content import reasoning_text
from mlx_responses.service.text.retention import UNBOUNDED, Retention
from mlx_responses.service.text.template_guard import template_time_limit

from mlx_responses.v1 import responses_pb2 as pb

ROLE_NAMES = {
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "assistant",
    # Developer messages render like system messages: few chat templates know the role.
    pb.ROLE_SYSTEM: "system",
    pb.ROLE_DEVELOPER: "system",
}

Message = dict[str, Any]

SUMMARY_HEADER = "Summary of the earlier conversation:\n"


def _part_text(part: pb.ContentPart) -> str:
    kind = part.WhichOneof("part")
    if kind == "input_text":
        return part.input_text.text
    if kind == "output_text":
        return part.output_text.text
    if kind == "refusal":
        return part.refusal.refusal
    if kind == "reasoning_text":
        return part.reasoning_text.text
    return ""


def _arguments_object(arguments: str) -> Any:
    # Templates expect a mapping (Qwen3 json-dumps it); keep invalid JSON as text.
    try:
        return loads_bounded(arguments) if arguments else {}
    except json.JSONDecodeError:
        return arguments


@dataclass
class _Builder:
    messages: list[Message] = field(default_factory=list)
    pending_reasoning: list[str] = field(default_factory=list)

    def _assistant(self) -> Message:
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant" and "tool_calls" in last:
            return last
        message: Message = {"role": "assistant", "content": ""}
        self._attach_reasoning(message)
        self.messages.append(message)
        return message

    def flush_reasoning(self) -> None:
        """A reasoning item with no reply after it still renders, as an empty assistant turn."""
        if self.pending_reasoning:
            message: Message = {"role": "assistant", "content": ""}
            self._attach_reasoning(message)
            self.messages.append(message)

    def _attach_reasoning(self, message: Message) -> None:
        if self.pending_reasoning:
            message["reasoning_content"] = "\n".join(self.pending_reasoning)
            self.pending_reasoning = []

    def add(self, item: pb.Item) -> None:
        item = model_item(item)  # a built-in tool's call or output, as the model knows it
        kind = item.WhichOneof("item")
        if kind == "message":
            role = ROLE_NAMES.get(item.message.role, "user")
            text = "".join(_part_text(p) for p in item.message.content)
            message: Message = {"role": role, "content": text}
            if role == "assistant":
                self._attach_reasoning(message)
            else:
                self.flush_reasoning()
            self.messages.append(message)
        elif kind == "function_call":
            call = item.function_call
            assistant = self._assistant()
            assistant.setdefault("tool_calls", []).append(
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": _arguments_object(call.arguments),
                    },
                }
            )
        elif kind == "custom_tool_call":
            # A custom tool is shown to the model as a function taking one string, `input`.
            custom = item.custom_tool_call
            self._assistant().setdefault("tool_calls", []).append(
                {
                    "id": custom.call_id,
                    "type": "function",
                    "function": {"name": custom.name, "arguments": {"input": custom.input}},
                }
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.flush_reasoning()
            out = getattr(item, kind)
            self.messages.append(
                {"role": "tool", "tool_call_id": out.call_id, "content": out.output}
            )
        elif kind == "reasoning":
            # A client that kept only the summary, or only `encrypted_content`, replays that.
            text = reasoning_text(item.reasoning)
            if text:
                self.pending_reasoning.append(text)
        elif kind == "compaction":
            # A replayed summary stands in for the turns it replaced (a user turn: many
            # templates refuse system messages after the first).
            summary, retained = decode_compaction(item.compaction.encrypted_content)
            self.messages.append({"role": "user", "content": f"{SUMMARY_HEADER}{summary}"})
            for retained_item in retained:
                self.add(retained_item)


def items_to_messages(instructions: str | None, items: Sequence[pb.Item]) -> list[Message]:
    """Chat messages for a turn: instructions first, then the items in order."""
    builder = _Builder()
    if instructions:
        builder.messages.append({"role": "system", "content": instructions})
    for item in effective_items(items):
        builder.add(item)
    builder.flush_reasoning()
    # Leading system messages merge into one: many templates allow a single system turn.
    messages = builder.messages
    head = 0
    while head < len(messages) and messages[head]["role"] == "system":
        head += 1
    if head > 1:
        merged = "\n\n".join(m["content"] for m in messages[:head])
        messages = [{"role": "system", "content": merged}, *messages[head:]]
    return messages


def tools_to_template(
    tools: Sequence[pb.Tool], parameters: Mapping[str, dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """Function tools in the chat-completions shape chat templates expect.

    `parameters`: each tool's parsed `parameters` by name (service/text/request_json.py).
    """
    result = []
    for tool in tools:
        fn = tool.function
        spec: dict[str, Any] = {"name": fn.name, "parameters": parameters.get(fn.name, {})}
        if fn.HasField("description"):
            spec["description"] = fn.description
        result.append({"type": "function", "function": spec})
    return result or None


@dataclass(frozen=True)
class RenderedPrompt:
    """A rendered prompt: its text, its tokens and whether it opens a reasoning block."""

    text: str
    tokens: list[int]
    opens_reasoning: bool
    # A vision model's processed images (service/engine/image_prompt.py VisionInputs).
    vision: Any = None
    # Where the leading system turn (instructions, developer messages, tools) ends in `tokens`:
    # the prefix other conversations under that turn share (0: not looked for, or none).
    system_end: int = 0
    # Where the client's cache breakpoints end in `tokens` (service/text/cache_breakpoints.py).
    breakpoints: tuple[int, ...] = ()
    # Where the deepest of them ends, on any model (0: the request marked nothing): the prefix
    # the client asked the cache to write, which its usage counts as written.
    marked_end: int = 0
    # Where the generation prompt the template appends begins in `tokens` (the assistant
    # turn's opening, `<|im_start|>assistant\n<think>\n`): the prefix the next turn shares,
    # which renders this turn's reply after it its own way (0: not looked for, or none).
    generation_start: int = 0
    # How long the prompt-cache entries of this prompt are kept (service/text/retention.py).
    retention: Retention = UNBOUNDED

    @property
    def checkpoints(self) -> tuple[int, ...]:
        """Positions worth a prompt-cache entry: the system turn's end, the breakpoints and
        where the generation prompt begins."""
        points = (self.system_end, *self.breakpoints, self.generation_start)
        return tuple(sorted({p for p in points if p > 0}))


def render_prompt(
    tokenizer: Any,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    template_kwargs: dict[str, Any],
    think_start: str | None,
) -> RenderedPrompt:
    """Renders through the model's own chat template; raises ValueError if it refuses.

    Blocking and bounded in time: callers on the event loop run it in a worker thread.
    """
    try:
        with template_time_limit():
            text = _renderer(tokenizer).apply_chat_template(
                messages,
                tools=tools,
                add_generation_prompt=True,
                tokenize=False,
                **template_kwargs,
            )
    except Exception as exc:  # jinja2 raises TemplateError and arbitrary errors from templates
        raise ValueError(f"the chat template refused the input: {exc}") from exc
    # Client text that spells a special token stays text (no forged turns).
    tokens = encode_prompt(tokenizer, text, data_texts(messages))
    opens = bool(think_start) and text.rstrip(" ").endswith(f"{think_start}\n")
    return RenderedPrompt(text=text, tokens=list(tokens), opens_reasoning=opens)


def _renderer(tokenizer: Any) -> Any:
    """What renders the chat template.

    NOTE: mlx-lm's TokenizerWrapper forces `enable_thinking=True` on any vocabulary with <think>
    tokens; the template's own default is what its authors meant, so render through the Hugging
    Face tokenizer unless mlx-lm supplies a custom renderer.
    """
    return tokenizer if getattr(tokenizer, "_chat_template", None) else tokenizer._tokenizer


def system_turn_end(
    tokenizer: Any,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    template_kwargs: dict[str, Any],
    tokens: list[int],
) -> int:
    """Where the prompt's leading system turn ends in `tokens` (its instructions, developer
    messages and tools, and the next turn's opening): the prefix that conversations under the
    same system turn share. Found as mlx-lm's server finds its system segment: the template
    renders the system turn before an empty user message, and the two part there. 0 when there
    is no such turn, or the template refuses the probe."""
    head = messages[:1] if messages and messages[0]["role"] == "system" else []
    if not head and not tools:
        return 0
    system = render_probe(
        tokenizer, [*head, {"role": "user", "content": ""}], tools, template_kwargs
    )
    return 0 if system is None else common_prefix(system, tokens)


def generation_start(
    tokenizer: Any,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    template_kwargs: dict[str, Any],
    prompt: RenderedPrompt,
) -> int:
    """Where the generation prompt (what the template appends for the reply: Qwen3.5's
    `<|im_start|>assistant\n<think>\n`, gpt-oss's `<|start|>assistant`) begins in `prompt`'s
    tokens: the conversation so far, which the next turn shares whatever follows it (the reply
    rendered its own way, or no reply: a client that drops an empty one). The template renders
    the conversation without it; the prompt's text is that and the generation prompt, whose
    tokens end the prompt's. 0 when the template refuses, or renders the conversation
    otherwise, or the tokens part elsewhere.

    NOTE: the next turn usually shares the generation prompt's head too (`<|im_start|>assistant
    \n`, a few tokens it prefills again): an entry there would be a second copy of the whole
    cache, and serves no next turn that drops the reply."""
    text = _render_text(tokenizer, messages, tools, template_kwargs)
    if text is None or not prompt.text.startswith(text):
        return 0
    tail = tokenizer.encode(prompt.text[len(text) :], add_special_tokens=False)
    n = len(tail)
    if not 0 < n < len(prompt.tokens) or prompt.tokens[-n:] != list(tail):
        return 0
    return len(prompt.tokens) - n


def _render_text(
    tokenizer: Any,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    template_kwargs: dict[str, Any],
) -> str | None:
    """`messages` through the chat template without a generation prompt (None: it refused)."""
    try:
        with template_time_limit():
            text = _renderer(tokenizer).apply_chat_template(
                messages,
                tools=tools,
                add_generation_prompt=False,
                tokenize=False,
                **template_kwargs,
            )
    except Exception:
        return None
    return text if isinstance(text, str) else None


# The latest probes' tokens, by their text: a client's breakpoints repeat from turn to turn (the
# system prompt and tools; the last turn's marked message, the one before it now), and encoding
# a long prefix costs as much as the prompt's own (a 45k-token prompt: about 70 ms).
MAX_PROBES = 16
# NOTE: keyed by the tokenizer's id: a model loaded where an unloaded one was could meet the
# other's entry; a position found from it is still a prefix of the prompt (a checkpoint placed
# too early, never a wrong token).
_PROBES: OrderedDict[tuple[str, int, str, tuple[str, ...]], list[int]] = OrderedDict()
_PROBES_LOCK = threading.Lock()


def render_probe(
    tokenizer: Any,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    template_kwargs: dict[str, Any],
) -> list[int] | None:
    """The tokens of `messages` rendered without a generation prompt (a prefix of a prompt's
    conversation); None when the template refuses them (a probe is an optimisation: a
    template may refuse an empty message, or a conversation ending where this one does)."""
    text = _render_text(tokenizer, messages, tools, template_kwargs)
    if text is None:
        return None
    data = data_texts(messages)
    # Per owner under --isolate-keys: a hit is faster, and no key may learn what another sent.
    key = (OWNER.get() or "", id(tokenizer), text, tuple(data))
    with _PROBES_LOCK:
        tokens = _PROBES.get(key)
        if tokens is not None:
            _PROBES.move_to_end(key)
            return tokens
    tokens = list(encode_prompt(tokenizer, text, data))
    with _PROBES_LOCK:
        _PROBES[key] = tokens
        while len(_PROBES) > MAX_PROBES:
            _PROBES.popitem(last=False)
    return tokens


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    shared = min(len(a), len(b))
    return next((i for i in range(shared) if a[i] != b[i]), shared)


def raw_prompt(tokenizer: Any, text: str) -> RenderedPrompt:
    """A legacy completions prompt: the text tokenized as is, without the chat template."""
    tokens = tokenizer.encode(text)  # with the tokenizer's own BOS, as mlx-lm's server does
    return RenderedPrompt(text=text, tokens=list(tokens), opens_reasoning=False)
