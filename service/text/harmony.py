"""The harmony format (gpt-oss): its control tokens, read from the model's own tokenizer.

A harmony turn is a series of messages `<|start|>ROLE<|channel|>CHANNEL<|message|>TEXT<|end|>`;
the assistant's last message ends with `<|return|>` (an answer) or `<|call|>` (a tool call).
The channel says what a message is: `analysis` the reasoning, `final` the answer, `commentary`
a tool call (its header names the recipient, `to=functions.NAME`) or, without a recipient, a
preamble the user sees. Generated output is read by token id (service/text/harmony_reader.py):
no id is hard-coded, and text a client typed never stands for a control token.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from mlx_responses.service.text.tool_formats import (
    ParsedToolCall,
    PartialCall,
    Schemas,
    ToolFormat,
    template_text,
)

START = "<|start|>"
END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
RETURN = "<|return|>"
CALL = "<|call|>"
# The namespace of the request's function tools; other recipients (browser.*, python, ...)
# are built-in tools this server does not run.
FUNCTIONS = "functions."


def hugging_face(tokenizer: Any) -> Any:
    """The Hugging Face tokenizer of mlx-lm's wrapper (or the one given)."""
    if hasattr(tokenizer, "added_tokens_decoder"):
        return tokenizer
    return getattr(tokenizer, "_tokenizer", tokenizer)


@dataclass(frozen=True)
class HarmonyTokens:
    """The ids of harmony's control tokens in one vocabulary (`constrain` may be missing)."""

    start: int
    end: int
    message: int
    channel: int
    return_: int
    call: int
    constrain: int | None = None

    @classmethod
    def of(cls, tokenizer: Any) -> HarmonyTokens | None:
        """The table of a tokenizer (mlx-lm's wrapper or Hugging Face's) holding harmony's
        special tokens; None when it lacks one of them."""
        decoder = getattr(hugging_face(tokenizer), "added_tokens_decoder", None) or {}
        ids = {t.content: i for i, t in decoder.items() if getattr(t, "special", False)}
        needed = (START, END, MESSAGE, CHANNEL, RETURN, CALL)
        if not all(text in ids for text in needed):
            return None
        return cls(
            ids[START],
            ids[END],
            ids[MESSAGE],
            ids[CHANNEL],
            ids[RETURN],
            ids[CALL],
            ids.get(CONSTRAIN),
        )

    @property
    def stops(self) -> tuple[int, int]:
        """The tokens that end an assistant turn: an answer, or a tool call to run."""
        return self.return_, self.call

    @property
    def closers(self) -> frozenset[int]:
        """The tokens that end a message."""
        return frozenset((self.end, self.return_, self.call))


@dataclass(frozen=True)
class Header:
    """A message's header as generated: `assistant to=functions.f<|channel|>commentary json`."""

    channel: str  # "analysis", "final", "commentary", or "" when the model wrote none
    recipient: str  # "functions.get_weather", "browser.search", "python", or ""

    @classmethod
    def parse(cls, role: str, channel: str, constrain: str = "") -> Header:
        """From the header's parts as text: before `<|channel|>`, after it, and after
        `<|constrain|>`. The recipient may be written in the role part or after the channel
        (either is harmony); the content type (`json`, `code`, ...) says nothing here."""
        words = channel.split()
        name = words[0] if words else ""
        recipient = ""
        for word in [*role.split(), *words[1:], *constrain.split()]:
            if word.startswith("to="):
                recipient = word[3:]
                break
        if name.startswith("to="):  # a recipient written where the channel name goes
            recipient, name = recipient or name[3:], ""
        # Protocol text glued to a name (vLLM #32587) never belongs to it.
        recipient = recipient.split("<|", 1)[0]
        return cls(name, recipient)

    def function(self, known: Collection[str]) -> str | None:
        """The offered function this message calls, if it calls one."""
        if not self.recipient.startswith(FUNCTIONS):
            return None
        name = self.recipient[len(FUNCTIONS) :]
        return name if name in known else None


def is_harmony(tokenizer: Any) -> bool:
    """Whether a model speaks harmony: its vocabulary holds the tokens and its template
    writes channels."""
    hf = hugging_face(tokenizer)
    return HarmonyTokens.of(hf) is not None and CHANNEL in template_text(hf)


class HarmonyFormat(ToolFormat):
    """Tool calls as harmony commentary messages to `functions.NAME`.

    Calls are read by token (harmony_reader.py), which hands the pipeline's tool streamer one
    span per call: the function's name, a newline, then the arguments as generated.
    """

    kind = "harmony"

    def __init__(self, tokens: HarmonyTokens) -> None:
        super().__init__(CHANNEL, CALL)
        self.tokens = tokens

    @staticmethod
    def span(name: str, arguments: str) -> str:
        """The span the reader hands over for a call (see the class docstring)."""
        return f"{name}\n{arguments}"

    def partial(self, body: str, schemas: Schemas) -> list[PartialCall]:
        name, _, arguments = body.partition("\n")
        return [PartialCall(name, arguments, False)] if name else []

    def parse(self, body: str, schemas: Schemas) -> list[ParsedToolCall]:
        name, _, arguments = body.partition("\n")
        if not name:
            raise ValueError("a harmony call names its function")
        return [ParsedToolCall(name, arguments.strip() or "{}")]


def _calls(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


def harmony_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as a harmony template takes them: harmony's rule for past reasoning
    applied, the reasoning as `thinking`, and a preamble marked `channel: commentary`.

    An assistant message followed by a call of the same turn is a preamble; any other is a
    final answer. Reasoning before the conversation's last final answer is dropped (that turn
    is over); reasoning after it (the tool loop of the turn still running) is kept, on the
    assistant message it preceded. The rule holds whatever the client replayed, so a stateless
    replay, a `previous_response_id` chain and a replay carrying only `encrypted_content`
    render one prompt.
    """
    preamble = [
        m.get("role") == "assistant"
        and not m.get("tool_calls")
        and i + 1 < len(messages)
        and _calls(messages[i + 1])
        for i, m in enumerate(messages)
    ]
    last_final = max(
        (
            i
            for i, m in enumerate(messages)
            if m.get("role") == "assistant" and not m.get("tool_calls") and not preamble[i]
        ),
        default=-1,
    )
    out: list[dict[str, Any]] = []
    for i, given in enumerate(messages):
        message = dict(given)
        reasoning = message.pop("reasoning_content", None)
        if message.get("role") == "assistant" and reasoning and i > last_final:
            message["thinking"] = reasoning
        if preamble[i]:
            message["channel"] = "commentary"
        out.append(message)
    return out


def harmony_format(tokenizer: Any) -> HarmonyFormat | None:
    """The harmony format of a model that speaks it (None for any other)."""
    tokens = HarmonyTokens.of(tokenizer) if is_harmony(tokenizer) else None
    return HarmonyFormat(tokens) if tokens is not None else None


def add_stops(tokenizer: Any) -> None:
    """Makes `<|return|>` and `<|call|>` end generation, whatever generation_config.json
    lists (early gpt-oss conversions miss `<|call|>`: the model then runs past its call)."""
    fmt = harmony_format(tokenizer)
    if fmt is not None:
        tokenizer.eos_token_ids = {*tokenizer.eos_token_ids, *fmt.tokens.stops}
