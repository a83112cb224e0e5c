"""Synthetic chat data for the tiny chat model: training conversations and held-out eval prompts."""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from training.tiny_chat import agent
from training.tiny_chat.lexicon import PARAM_NOUNS, TOOL_VERBS, unique_words

Split = Literal["train", "eval"]
Message = dict[str, Any]
Tool = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Phrasings. ``{w}`` is the word to echo, ``{x}``/``{y}`` are distractor words. The eval pools are
# used ONLY for held-out prompts.
# ---------------------------------------------------------------------------------------------
ECHO_TRAIN = (
    "Reply with: {w}",
    "Reply with: {w}",
    "Reply with: {w}",
    "Reply with: {w}.",
    "Reply with: {w}!",
    "Now reply with: {w}",
    "Just reply with: {w}",
    "Can you reply with: {w}",
    "Okay. Reply with: {w}",
    "Hi! Reply with: {w}",
    "Please answer. Reply with: {w}",
    "I have a test for you. Reply with: {w}",
    "{x} and {y}. Reply with: {w}",
    "Forget {x}. Reply with: {w}",
    "Do not say {x}. Reply with: {w}",
    "Reply with: {w}\nNothing else.",
    "Reply with: {w} (one word only)",
    "Reply with: {w}, nothing more.",
    "Ignore the last answer and reply with: {w}",
    "Say one word. Reply with: {w}",
    "The answer is not {x}. Reply with: {w}",
    "Reply with: {w}\n",
    "Here is a task.\nReply with: {w}",
    "Reply with: {w}. Thanks!",
    "Reply with: {w}\nThanks a lot.",
    "Reply with: {w}, please.",
    "Thanks. Now reply with: {w}",
    "Reply with: {w}\nIs that clear?",
)
ECHO_EVAL = (
    "Please reply with: {w}",
    "reply with: {w}",
    "{w}? Reply with: {w}",
    "{x}? Reply with: {w}",
    "Quick test. Reply with: {w}",
    "Reply with: {w}\nThank you.",
    "Hello there. Now reply with: {w}.",
    "Not {x}, not {y}. Just reply with: {w}",
)
THINK_TRAIN = (
    "Think first, then reply with: {w}",
    "Think first, then reply with: {w}",
    "Think about it, then reply with: {w}",
    "Think step by step, then reply with: {w}",
    "First think, then reply with: {w}",
    "Please think first. Reply with: {w}",
    "Think carefully and reply with: {w}",
    "Think first. Then reply with: {w}.",
    "Forget {x}. Think first, then reply with: {w}",
)
THINK_EVAL = (
    "Think first, and then reply with: {w}",
    "Please think first, then reply with: {w}",
    "Think hard, then reply with: {w}.",
    "Think about {x} first, then reply with: {w}",
)
TOOL_TRAIN = (
    "Use the {t} tool with {p} set to {v}.",
    "Use the {t} tool with {p} set to {v}.",
    "Use the {t} tool with {p} set to {v}",
    "Call {t} with {p} set to {v}.",
    "Please call the {t} function with {p} = {v}.",
    "Use {t} and set {p} to {v}.",
    "I need {t} with {p} set to {v}.",
    "Invoke the {t} tool. Set {p} to {v}.",
    "Run {t} with {p} set to {v} please.",
    "Call the {t} tool with {p} = {v}",
    "Now use the {t} tool with {p} set to {v}.",
    "Use the {t} function, {p} set to {v}.",
    "Use the {t} tool with {p} set to {v}, please.",
    "Call {t} with {p} set to {v}. Thanks!",
    "Use {t} with {p} = {v} now.",
    "Please run the {t} tool with {p} set to {v} and tell me the result.",
    "Call the {t} tool. Its {p} is {v}.",
    "Please call {t} with {p} set to {v}.",
    "Now call {t} with {p} = {v}.",
    "Could you call the {t} tool with {p} set to {v}?",
    "You should call {t}, {p} set to {v}.",
    "Try {t} with {p} set to {v}.",
    "Let us use {t} with {p} set to {v}.",
)
TOOL_EVAL = (
    "Please use the {t} tool with {p} set to {v}.",
    "Call the {t} tool, with {p} set to {v}.",
    "Go ahead and call {t} with {p} set to {v}, thanks.",
    "Use the {t} tool now with {p} = {v}.",
)
# Training only (a mix's ``p_composed``): tool requests composed from these parts, so a phrasing
# is a new combination of familiar parts rather than one of 24 fixed sentences (A1 failed the
# held-out "Go ahead and call {t} ..., thanks." 21 times in 50, and the other three held-out
# phrasings 3 times in 150). The held-out sentences themselves are never composed.
TOOL_OPENERS = (
    "",
    "",
    "",
    "Please ",
    "Now ",
    "Okay, ",
    "Next, ",
    "Could you ",
    "Can you ",
    "I want you to ",
    "Right, ",
    "Kindly ",
    "Go on and ",
    "Then ",
    "So, ",
    "Hey, ",
    "Alright, ",
    "Just ",
)
TOOL_ACTIONS = (
    "call {t}",
    "call the {t} tool",
    "use {t}",
    "use the {t} tool",
    "run {t}",
    "run the {t} tool",
    "invoke {t}",
    "invoke the {t} function",
    "call the {t} function",
    "try the {t} tool",
    "use the {t} function",
    "make a call to {t}",
)
TOOL_ARGUMENTS = (
    " with {p} set to {v}",
    " with {p} set to {v}",
    " with {p} = {v}",
    ", with {p} set to {v}",
    ", {p} set to {v}",
    " using {p} = {v}",
    ". Set {p} to {v}",
    " and set {p} to {v}",
    " where {p} is {v}",
    " passing {p} as {v}",
    " with {p}: {v}",
    " now with {p} set to {v}",
    " with the {p} {v}",
    " for {p} {v}",
)
TOOL_CLOSERS = (
    "",
    ".",
    ".",
    ".",
    "!",
    "?",
    " please.",
    ", please.",
    " now.",
    ", thanks.",
    ". Thanks!",
    ", thank you.",
    ". Thank you.",
    " for me.",
    " right away.",
    " and tell me the result.",
)
SYSTEM_TRAIN = (
    "You are a helpful assistant.",
    "You are a helpful assistant.",
    "You are a concise assistant.",
    "Answer briefly.",
    "Be polite and short.",
    "You are {x}, a friendly robot.",
    "Follow the user's instructions exactly.",
    "You are a helpful assistant. Always reply in lowercase.",
    "The weather today is {x}. You like {y}.",
    "Always reply with one word.",
    "You are a test model. Do what the user asks.",
    "{x} {y} {z}.",
    "Instructions: be brief. Favourite color: {x}.",
    "You are an AI assistant that follows instructions.",
)
SYSTEM_EVAL = (
    "You are a helpful assistant that answers in one word.",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    "Keep answers short. Your favourite word is {x}.",
    "You are a careful assistant. Never mention {x}.",
)
# Multi-word copies (training only): the answer is everything after the colon.
REPEAT_TRAIN = (
    "Repeat after me: {s}",
    "Repeat after me: {s}",
    "Copy this: {s}",
    "Say exactly: {s}",
)
CHAT_USER = (
    "Hi there.",
    "How are you?",
    "Tell me about {x}.",
    "What do you think of {x} and {y}?",
    "Hello!",
    "Describe a {x}.",
    "Is {x} better than {y}?",
    "Thanks!",
    "What is your name?",
    "Write a poem about {x}.",
)
DESCRIPTIONS = (
    "{V} the {n}.",
    "{V} a {n}.",
    "{V} the {n} for a given {p}.",
    "Returns the {n}.",
    "{V} {n} data.",
    "",
)

# Random lowercase strings (a mix's ``p_random``) stand in for copy targets, and at half that
# rate for name parts and distractors: the model must learn to copy by spelling.
LOWERCASE = "abcdefghijklmnopqrstuvwxyz"
MAX_RANDOM_LETTERS = 12

THINK_ECHO = "The user wants {w}."
THINK_TOOL_CALL = "I will call a tool."
THINK_TOOL_RESULT = "The tool returned {w}."
THINK_CHAT = "The user is chatting."
CHAT_ANSWER = "ok"

# Tools whose names the server tests are likely to use; always in the training split.
CANONICAL_TOOLS: tuple[tuple[str, str], ...] = (
    ("get_weather", "city"),
    ("lookup_word", "word"),
    ("get_time", "city"),
    ("search_web", "query"),
    ("get_weather", "location"),
    ("send_email", "address"),
    ("translate_text", "text"),
)


def _stable_bucket(*parts: str, modulo: int = 5) -> int:
    """Deterministic hash bucket of a tuple of strings (Python's hash() is salted)."""
    return zlib.crc32("|".join(parts).encode()) % modulo


def is_eval_tool_name(name: str) -> bool:
    """Tool names in bucket 0 are reserved for held-out evaluation."""
    if any(name == canonical for canonical, _ in CANONICAL_TOOLS):
        return False
    return _stable_bucket(name) == 0


def tool_call_text(name: str, arguments: dict[str, str]) -> str:
    """The exact assistant output for one tool call, in the Qwen3 format."""
    return (
        '<tool_call>\n{"name": "'
        + name
        + '", "arguments": '
        + json.dumps(arguments)
        + "}\n</tool_call>"
    )


def think_text(reasoning: str, answer: str) -> str:
    """Assistant text of a think block followed by the answer."""
    return "<think>\n" + reasoning + "\n</think>\n\n" + answer


@dataclass
class Turn:
    """One assistant message with what it was generated under."""

    index: int  # position of the assistant message in the conversation
    enable_thinking: bool  # whether the generation prompt ended with <think>\n
    train: bool  # whether its tokens are training targets
    expected: str  # exact text after the generation prompt, up to (without) <|im_end|>


@dataclass
class Conversation:
    """A full conversation (ending with an assistant message) plus its trainable turns."""

    messages: list[Message]
    tools: list[Tool] | None
    turns: list[Turn] = field(default_factory=list)
    kind: str = ""


@dataclass(frozen=True)
class EvalPrompt:
    """A held-out prompt and the exact expected assistant continuation (without <|im_end|>)."""

    behaviour: str
    variant: str
    messages: list[Message]
    tools: list[Tool] | None
    enable_thinking: bool
    expected: str


class Generator:
    """Samples conversations from either the train or the eval pools."""

    def __init__(self, seed: int, split: Split) -> None:
        self.rng = random.Random(seed)
        self.split = split
        self.words = unique_words()
        self.verbs = list(dict.fromkeys(TOOL_VERBS))
        self.nouns = list(dict.fromkeys(PARAM_NOUNS))
        ev = split == "eval"
        self.echo_pool = ECHO_EVAL if ev else ECHO_TRAIN
        self.think_pool = THINK_EVAL if ev else THINK_TRAIN
        self.tool_pool = TOOL_EVAL if ev else TOOL_TRAIN
        self.system_pool = SYSTEM_EVAL if ev else SYSTEM_TRAIN
        self.repeat_words = (1, 5)
        self.p_random = 0.0
        self.p_lead = self.p_trail = 0.0  # see surround()
        self.name_parts: tuple[float, float, float] = (1, 8, 2)
        self.p_two_part_key = 0.15
        self.p_composed = 0.0
        self.p_patch_given = 0.0

    # -- small helpers -------------------------------------------------------------------------
    def word(self) -> str:
        return self.rng.choice(self.words)

    def random_word(self, low: int = 1, high: int = MAX_RANDOM_LETTERS) -> str:
        """A random lowercase string: spelled in letter-pair tokens, never seen twice."""
        n = self.rng.randint(low, high)
        return "".join(self.rng.choice(LOWERCASE) for _ in range(n))

    def copy_word(self) -> str:
        """A word the answer copies: in training often a random string, so copying is by spelling.

        The eval split draws lexicon words only, with the same random draws as before.
        """
        if self.split == "train" and self.p_random > 0 and self.rng.random() < self.p_random:
            return self.random_word()
        return self.word()

    def distractor(self) -> str:
        if self.split == "train" and self.p_random > 0 and self.rng.random() < self.p_random / 2:
            return self.random_word(2)
        return self.word()

    def fill(self, template: str, **kw: str) -> str:
        values = {"x": self.distractor(), "y": self.distractor(), "z": self.distractor(), **kw}
        return template.format(**values)

    def sentence(self, capitalize: bool = True) -> str:
        """A few lexicon words as a sentence: text around a copy target that is not the target."""
        text = " ".join(self.word() for _ in range(self.rng.randint(1, 4)))
        text = text.capitalize() if capitalize else text
        return text + self.rng.choice((".", ".", "!", "?", ""))

    def long_text(self, low: int = 100, high: int = 1400) -> str:
        """Long instructions, up to ~`high` tokens: sentences of lexicon words, unknown words
        (spelled in letter pairs), paths, markup and punctuation, as agents' prompts have."""
        n, parts = self.rng.randint(low, high), []
        while n > 0:
            k = min(n, self.rng.randint(4, 14))
            words = [
                self.random_word(2, 10) if self.rng.random() < 0.3 else self.word()
                for _ in range(k)
            ]
            roll = self.rng.random()
            if roll < 0.15:
                tag = self.word()
                parts.append(f"<{tag}>/{'/'.join(words[:3])}</{tag}>\n")
            elif roll < 0.25:
                parts.append("- `" + "_".join(words[:2]) + "`: " + " ".join(words[2:]) + ".\n")
            else:
                parts.append(
                    " ".join(words).capitalize() + self.rng.choice((". ", ".\n", ": ", "? "))
                )
            n -= k + 2
        return "".join(parts).strip()

    def tool_template(self) -> str:
        """A tool request's phrasing: from the pool, or (training, ``p_composed``) composed."""
        if self.split != "train" or self.p_composed <= 0 or self.rng.random() >= self.p_composed:
            return self.rng.choice(self.tool_pool)
        while True:
            parts = (TOOL_OPENERS, TOOL_ACTIONS, TOOL_ARGUMENTS, TOOL_CLOSERS)
            text = "".join(self.rng.choice(p) for p in parts)
            text = text[0].upper() + text[1:]
            if text not in TOOL_EVAL:
                return text

    def surround(self, text: str) -> str:
        """Training only: sentences before and after a request, so the target is found by what
        introduces it (`with:`, `set to`), not by being the last word."""
        if self.split != "train":
            return text
        if self.rng.random() < self.p_lead:
            text = self.sentence() + self.rng.choice((" ", "\n", "\n\n")) + text
        if self.rng.random() < self.p_trail:
            sep = self.rng.choice((" ", "\n", "\n\n", ", ", ". "))
            text = text + sep + self.sentence(capitalize=sep != ", ")
        return text

    def gibberish(self) -> str:
        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        n = self.rng.randint(3, 9)
        return "".join(self.rng.choice(letters) for _ in range(n))

    def system_text(self) -> str:
        text = self.fill(self.rng.choice(self.system_pool))
        if self.split == "train" and self.rng.random() < 0.25:
            extra = " ".join(
                self.gibberish() if self.rng.random() < 0.5 else self.word()
                for _ in range(self.rng.randint(1, 6))
            )
            text = text + " " + extra.capitalize() + "."
        return text

    def noun(self) -> str:
        if self.split == "train" and self.p_random > 0 and self.rng.random() < self.p_random / 2:
            return self.random_word(2, 8)
        return self.rng.choice(self.nouns)

    def tool_name(self) -> str:
        while True:
            n_parts = self.rng.choices((1, 2, 3), weights=self.name_parts)[0]
            if n_parts == 1:
                name = self.noun()
            else:
                rest = [self.noun() for _ in range(n_parts - 1)]
                name = "_".join([self.rng.choice(self.verbs), *rest])
            if is_eval_tool_name(name) == (self.split == "eval"):
                return name

    def param_name(self) -> str:
        if self.rng.random() < self.p_two_part_key:
            return self.noun() + "_" + self.noun()
        return self.noun()

    def make_tool(self, name: str, param: str) -> Tool:
        verb = name.split("_", maxsplit=1)[0]
        noun = " ".join(name.split("_")[1:]) or name
        desc = self.rng.choice(DESCRIPTIONS).format(V=verb.capitalize(), n=noun, p=param)
        prop: dict[str, Any] = {"type": "string"}
        if self.rng.random() < 0.5:
            prop["description"] = f"The {param.replace('_', ' ')}."
        params: dict[str, Any] = {"type": "object", "properties": {param: prop}}
        if self.rng.random() < 0.7:
            params["required"] = [param]
        if self.rng.random() < 0.15:
            params["additionalProperties"] = False
        function: dict[str, Any] = {"name": name, "description": desc, "parameters": params}
        if self.rng.random() < 0.3:
            return {"type": "function", **function}
        return {"type": "function", "function": function}

    def make_tools(self) -> tuple[list[Tool], list[tuple[str, str]]]:
        n_tools = self.rng.choices((1, 2, 3), weights=(4, 4, 3))[0]
        specs: list[tuple[str, str]] = []
        names: set[str] = set()
        while len(specs) < n_tools:
            if self.split == "train" and self.rng.random() < 0.2:
                name, param = self.rng.choice(CANONICAL_TOOLS)
            else:
                name, param = self.tool_name(), self.param_name()
            if name in names:
                continue
            names.add(name)
            specs.append((name, param))
        return [self.make_tool(n, p) for n, p in specs], specs

    # -- exchanges: each appends messages and returns trainable turns ---------------------------
    def echo_exchange(self, msgs: list[Message], think: bool, history: bool) -> list[Turn]:
        w = self.copy_word()
        user = self.surround(self.fill(self.rng.choice(self.echo_pool), w=w))
        msgs.append({"role": "user", "content": user})
        return [
            self._answer(
                msgs,
                w,
                reasoning=THINK_ECHO.format(w=w) if think else None,
                think=think,
                history=history,
            )
        ]

    def think_request_exchange(self, msgs: list[Message], think: bool, history: bool) -> list[Turn]:
        w = self.copy_word()
        user = self.surround(self.fill(self.rng.choice(self.think_pool), w=w))
        msgs.append({"role": "user", "content": user})
        reasoning = THINK_ECHO.format(w=w)
        if history and self.rng.random() < 0.3:
            # a client that drops reasoning from history; not a training target
            msgs.append({"role": "assistant", "content": w})
            return [Turn(len(msgs) - 1, think, False, w)]
        return [
            self._answer(
                msgs, w, reasoning=reasoning, think=think, history=history, keep_reasoning=True
            )
        ]

    def repeat_exchange(self, msgs: list[Message], think: bool, history: bool) -> list[Turn]:
        """Copy a span of several words, mostly random strings: every answer token is a copy."""
        n = self.rng.randint(*self.repeat_words)
        span = " ".join(
            self.random_word() if self.rng.random() < 0.6 else self.word() for _ in range(n)
        )
        msgs.append({"role": "user", "content": self.rng.choice(REPEAT_TRAIN).format(s=span)})
        return [self._answer(msgs, span, reasoning=None, think=False, history=history)]

    def chat_exchange(self, msgs: list[Message], think: bool, history: bool) -> list[Turn]:
        msgs.append({"role": "user", "content": self.fill(self.rng.choice(CHAT_USER))})
        if history and self.rng.random() < 0.5:
            text = " ".join(self.word() for _ in range(self.rng.randint(1, 6))).capitalize() + "."
            msgs.append({"role": "assistant", "content": text})
            return [Turn(len(msgs) - 1, think, False, text)]
        return [
            self._answer(
                msgs,
                CHAT_ANSWER,
                reasoning=THINK_CHAT if think else None,
                think=think,
                history=history,
            )
        ]

    def tool_exchange(
        self,
        msgs: list[Message],
        specs: list[tuple[str, str]],
        *,
        think: bool,
        history: bool,
        stop_after_call: bool,
    ) -> list[Turn]:
        name, param = self.rng.choice(specs)
        value = self.copy_word()
        user = self.surround(self.fill(self.tool_template(), t=name, p=param, v=value))
        msgs.append({"role": "user", "content": user})
        arguments: Any = {param: value}
        if self.rng.random() < 0.3:
            seps = (", ", ": ") if self.rng.random() < 0.7 else (",", ":")
            arguments = json.dumps(arguments, separators=seps)
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        if self.rng.random() < 0.5:
            call["id"] = f"call_{self.rng.randint(0, 10**6)}"
        assistant: Message = {"role": "assistant", "content": "", "tool_calls": [call]}
        if self.rng.random() < 0.3:
            assistant["content"] = None
        turns: list[Turn] = []
        # the tool call turn: trainable when arguments render in the canonical form
        canonical = not isinstance(arguments, str) or arguments == json.dumps({param: value})
        expected = tool_call_text(name, {param: value})
        if think and (not history or self.rng.random() < 0.5):
            assistant["reasoning_content"] = THINK_TOOL_CALL
            msgs.append(assistant)
            turns.append(
                Turn(len(msgs) - 1, True, canonical, THINK_TOOL_CALL + "\n</think>\n\n" + expected)
            )
        else:
            msgs.append(assistant)
            turns.append(Turn(len(msgs) - 1, False, canonical, expected))
        if stop_after_call:
            return turns
        result = self.copy_word()
        tool_msg: Message = {"role": "tool", "content": result}
        if self.rng.random() < 0.5:
            tool_msg["tool_call_id"] = call.get("id", "call_0")
        msgs.append(tool_msg)
        reasoning = THINK_TOOL_RESULT.format(w=result) if think else None
        turns.append(self._answer(msgs, result, reasoning=reasoning, think=think, history=history))
        return turns

    def agent_tools(self, tools: list[Tool], *, with_patch: bool) -> list[Tool]:
        """The conversation's tools among agent-style decoys (and apply_patch, called only when
        a file is asked for)."""
        rng = self.rng
        taken = {t.get("name") or t["function"]["name"] for t in tools}
        out = tools + agent.decoy_tools(rng, rng.randint(1, 4), taken)
        if with_patch or rng.random() < 0.5:
            out.append(agent.APPLY_PATCH_TOOL)
        rng.shuffle(out)
        return out

    def patch_exchange(
        self, msgs: list[Message], *, history: bool, stop_after_call: bool
    ) -> list[Turn]:
        """A file asked for: apply_patch called with the patch that adds it; after its result,
        a short confirmation."""
        rng = self.rng
        name = agent.file_name(rng, self.copy_word())
        n_words = rng.choices((1, 2, 3), weights=(6, 2, 1))[0]
        content = " ".join(self.copy_word() for _ in range(n_words))
        while self.split == "train" and agent.replay_case(name, content):
            content = self.copy_word()  # never a patch codex_replay asks for
        patch = agent.patch_input(name, content)
        if self.p_patch_given > 0 and rng.random() < self.p_patch_given:
            pool = agent.PATCH_GIVEN if self.split == "train" else agent.PATCH_GIVEN[:1]
        else:
            pool = agent.PATCH_REQUESTS if self.split == "train" else agent.PATCH_REQUESTS[:1]
        request = self.fill(rng.choice(pool), f=name, c=content, p=patch.rstrip("\n"))
        msgs.append({"role": "user", "content": request})
        arguments = {"input": patch}
        call: dict[str, Any] = {
            "type": "function",
            "function": {"name": agent.APPLY_PATCH, "arguments": arguments},
        }
        if rng.random() < 0.7:
            call["id"] = f"call_{rng.randint(0, 10**6)}"
        msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
        turns = [Turn(len(msgs) - 1, False, True, tool_call_text(agent.APPLY_PATCH, arguments))]
        if stop_after_call:
            return turns
        result = rng.choice(agent.PATCH_RESULTS).format(f=name)
        msgs.append({"role": "tool", "tool_call_id": call.get("id", "call_0"), "content": result})
        turns.append(
            self._answer(msgs, agent.PATCH_DONE, reasoning=None, think=False, history=history)
        )
        return turns

    def _answer(
        self,
        msgs: list[Message],
        answer: str,
        *,
        reasoning: str | None,
        think: bool,
        history: bool,
        keep_reasoning: bool = False,
    ) -> Turn:
        """Append the assistant answer. ``think`` = generated under enable_thinking."""
        msg: Message = {"role": "assistant", "content": answer}
        if reasoning is not None:
            drop = history and not keep_reasoning and self.rng.random() < 0.4
            if drop:
                # reasoning stripped by the client: the turn now reads like a plain answer
                msgs.append(msg)
                return Turn(len(msgs) - 1, False, True, answer)
            if self.rng.random() < 0.15 and history:
                msg["content"] = think_text(reasoning, answer)  # inline think block
            else:
                msg["reasoning_content"] = reasoning
        msgs.append(msg)
        if think:
            assert reasoning is not None
            expected = reasoning + "\n</think>\n\n" + answer
        elif reasoning is not None:
            expected = think_text(reasoning, answer)
        else:
            expected = answer
        return Turn(len(msgs) - 1, think, True, expected)

    # -- whole conversations -------------------------------------------------------------------
    def conversation(self, kind: str, think: bool, mix: Mix | None = None) -> Conversation:
        """A conversation whose final assistant turn exhibits ``kind``."""
        rng = self.rng
        mix = mix or EVAL_MIX
        self.repeat_words = mix.repeat_words
        self.p_random = mix.p_random
        self.p_lead, self.p_trail = mix.p_lead, mix.p_trail
        self.name_parts, self.p_two_part_key = mix.name_parts, mix.p_two_part_key
        self.p_composed = mix.p_composed
        self.p_patch_given = mix.p_patch_given
        needs_tools = kind in ("tool_call", "tool_result", "patch", "patch_call")
        use_tools = needs_tools or rng.random() < mix.p_optional_tools
        tools, specs = self.make_tools() if use_tools else (None, [])
        if kind in ("patch", "patch_call") or (mix.p_decoys > 0 and rng.random() < mix.p_decoys):
            tools = self.agent_tools(tools or [], with_patch=kind in ("patch", "patch_call"))
        msgs: list[Message] = []
        codex = (
            kind in ("patch", "patch_call")
            and mix.p_codex_preamble > 0
            and rng.random() < mix.p_codex_preamble
        )
        if codex:
            # Codex's own first request as the window holds it at the call: the tail of its
            # developer messages, its environment context, then the request (no history).
            for text in agent.codex_preamble(rng, rng.randint(200, 1000)):
                msgs.append({"role": "developer", "content": text})
            msgs.append({"role": "user", "content": agent.environment_context(rng)})
        elif rng.random() < mix.p_system:
            role = "system" if rng.random() < 0.75 else "developer"
            msgs.append({"role": role, "content": self.system_text()})
        if not codex and mix.p_long_system > 0 and rng.random() < mix.p_long_system:
            # Long instructions first, as agents send them (developer messages, then a user
            # message of context): the answer must not depend on position or on the preamble.
            budget = rng.randint(100, 1300)
            n_parts = rng.randint(1, 3)
            real = mix.p_agent_prose > 0 and rng.random() < mix.p_agent_prose
            for i in range(n_parts):
                role = ("system", "developer")[rng.random() < 0.6] if i == 0 else "developer"
                if i == n_parts - 1 and n_parts > 1:
                    role = "user"
                if real:
                    text = agent.prose(rng, rng.randint(20, max(20, budget // n_parts)))
                else:
                    text = self.long_text(20, budget // n_parts)
                msgs.append({"role": role, "content": text})
            if real and rng.random() < 0.5:
                msgs.append({"role": "user", "content": agent.environment_context(rng)})
        turns: list[Turn] = []
        n_history = 0 if codex else rng.choices(range(len(mix.history)), weights=mix.history)[0]
        for _ in range(n_history):
            echo_w, think_w, chat_w, tool_w = mix.history_kinds
            h_kind = rng.choices(
                ("echo", "think_request", "chat", "tool"),
                weights=(echo_w, think_w, chat_w, tool_w if specs else 0),
            )[0]
            h_think = rng.random() < 0.3
            turns += self._exchange(msgs, h_kind, specs, h_think, history=True)
        turns += self._exchange(msgs, kind, specs, think, history=False)
        return Conversation(msgs, tools, turns, kind)

    def _exchange(
        self,
        msgs: list[Message],
        kind: str,
        specs: list[tuple[str, str]],
        think: bool,
        history: bool,
    ) -> list[Turn]:
        if kind == "echo":
            return self.echo_exchange(msgs, think, history)
        if kind == "think_request":
            return self.think_request_exchange(msgs, think, history)
        if kind == "repeat":
            return self.repeat_exchange(msgs, think, history)
        if kind == "chat":
            return self.chat_exchange(msgs, think, history)
        if kind in ("tool", "tool_result"):
            return self.tool_exchange(
                msgs, specs, think=think, history=history, stop_after_call=False
            )
        if kind == "tool_call":
            return self.tool_exchange(
                msgs, specs, think=think, history=history, stop_after_call=True
            )
        if kind in ("patch", "patch_call"):
            return self.patch_exchange(msgs, history=history, stop_after_call=kind == "patch_call")
        raise ValueError(f"unknown kind {kind!r}")


@dataclass(frozen=True)
class Mix:
    """How conversations are drawn: final-turn kinds and the shape of what precedes them."""

    kinds: tuple[tuple[str, float, float], ...]  # kind, weight, P(enable_thinking) for the turn
    p_system: float  # probability of a system/developer message
    history: tuple[float, ...]  # weights of 0, 1, 2, ... earlier exchanges
    p_optional_tools: float  # probability of tools in a conversation that does not need them
    # weights of the earlier exchanges' kinds: echo, think_request, chat, tool (if tools)
    history_kinds: tuple[float, float, float, float] = (5, 2, 2, 3)
    repeat_words: tuple[int, int] = (1, 5)  # words in a "repeat" span
    p_random: float = 0.0  # how often a copy target is a random string (training only)
    # how often a request has a sentence before / after it (training only; see surround())
    p_lead: float = 0.0
    p_trail: float = 0.0
    p_long_system: float = 0.0  # how often long instructions come first (training only)
    # tool names of 1, 2 or 3 parts (weights), and how often an argument key has two parts
    name_parts: tuple[float, float, float] = (1, 8, 2)
    p_two_part_key: float = 0.15
    p_composed: float = 0.0  # how often a tool request is composed (training only)
    # how often long instructions are real prose (agent.py) rather than synthetic (training only)
    p_agent_prose: float = 0.0
    # how often agent-style decoy tools (and apply_patch) join a conversation (training only)
    p_decoys: float = 0.0
    # how often a patch request quotes the patch to apply (agent.PATCH_GIVEN; training only)
    p_patch_given: float = 0.0
    # how often a patch conversation opens as Codex's own request does: the tail of its
    # developer messages (agent.codex_preamble) and its environment context (training only)
    p_codex_preamble: float = 0.0


# The shape of the held-out prompts (phrasings come from the eval pools).
EVAL_MIX = Mix(
    kinds=(),
    p_system=0.55,
    history=(5, 4, 2),
    p_optional_tools=0.2,
)
# Long multi-word copies, about half of all tokens copy targets: the induction (copy) circuit
# needs many copy targets to form, and little else is there to learn (the first curriculum step).
COPY_MIX = Mix(
    kinds=(("repeat", 0.8, 0.0), ("echo", 0.2, 0.0)),
    p_system=0.1,
    history=(3, 2),
    p_optional_tools=0.0,
    history_kinds=(1, 0, 0, 0),
    repeat_words=(2, 8),
)
# Short, tool-free conversations with several echo turns each: many copy targets per token and
# little context to search, so the copy circuit forms early (a curriculum for the first steps).
SHORT_MIX = Mix(
    kinds=(("echo", 0.6, 0.2), ("think_request", 0.25, 0.15), ("chat", 0.05, 0.2)),
    p_system=0.3,
    history=(2, 3, 3, 2),
    p_optional_tools=0.0,
)
# Tool conversations with several tool exchanges each, to learn span copying into the call.
TOOL_MIX = Mix(
    kinds=(
        ("tool_call", 0.6, 0.15),
        ("tool_result", 0.25, 0.15),
        ("echo", 0.1, 0.2),
        ("think_request", 0.05, 0.1),
    ),
    p_system=0.3,
    history=(3, 4, 3),
    p_optional_tools=1.0,
    history_kinds=(1, 0.5, 0.5, 6),
)
# Everything, in proportions close to the evaluation.
FULL_MIX = Mix(
    kinds=(
        ("echo", 0.26, 0.25),
        ("think_request", 0.13, 0.15),
        ("tool_call", 0.33, 0.2),
        ("tool_result", 0.20, 0.2),
        ("chat", 0.05, 0.2),
    ),
    p_system=0.55,
    history=(4, 4, 3),
    p_optional_tools=0.25,
    history_kinds=(4, 2, 2, 5),
)


def train_conversations(n: int, seed: int, mix: Mix = FULL_MIX) -> list[Conversation]:
    """``n`` training conversations drawn from the training pools."""
    gen = Generator(seed, "train")
    kinds = [k for k, _, _ in mix.kinds]
    weights = [w for _, w, _ in mix.kinds]
    think_p = {k: p for k, _, p in mix.kinds}
    out = []
    for _ in range(n):
        kind = gen.rng.choices(kinds, weights=weights)[0]
        out.append(gen.conversation(kind, gen.rng.random() < think_p[kind], mix))
    return out


def _to_eval(conv: Conversation, behaviour: str, variant: str) -> EvalPrompt:
    final = conv.turns[-1]
    prompt_msgs = conv.messages[: final.index]
    return EvalPrompt(
        behaviour, variant, prompt_msgs, conv.tools, final.enable_thinking, final.expected
    )


def eval_prompts(behaviour: str, n: int = 200, seed: int = 1234) -> list[EvalPrompt]:
    """Held-out prompts for one behaviour: ``echo``, ``tool`` or ``think``."""
    gen = Generator(seed + zlib.crc32(behaviour.encode()), "eval")
    out: list[EvalPrompt] = []
    for i in range(n):
        if behaviour == "echo":
            conv = gen.conversation("echo", think=False)
            out.append(_to_eval(conv, "echo", "echo"))
        elif behaviour == "tool":
            variant = "tool_call" if i % 2 == 0 else "tool_result"
            conv = gen.conversation(variant, think=False)
            out.append(_to_eval(conv, "tool", variant))
        elif behaviour == "think":
            if i % 2 == 0:
                conv = gen.conversation("echo", think=True)
                out.append(_to_eval(conv, "think", "enable_thinking"))
            else:
                conv = gen.conversation("think_request", think=False)
                out.append(_to_eval(conv, "think", "think_request"))
        elif behaviour == "patch":
            variant = "patch_call" if i % 2 == 0 else "patch_done"
            conv = gen.conversation("patch_call" if i % 2 == 0 else "patch", think=False)
            out.append(_to_eval(conv, "patch", variant))
        elif behaviour == "patch_given":
            # the request quotes the patch to apply (agent.PATCH_GIVEN)
            variant = "given_call" if i % 2 == 0 else "given_done"
            mix = replace(EVAL_MIX, p_patch_given=1.0)
            conv = gen.conversation("patch_call" if i % 2 == 0 else "patch", False, mix)
            out.append(_to_eval(conv, "patch_given", variant))
        else:
            raise ValueError(f"unknown behaviour {behaviour!r}")
    return out


# Ordinary English words outside the lexicon (each is spelled in letter-pair tokens), for the
# copy-what-it-never-saw evaluation; `unknown_word_prompts` adds random strings.
# fmt: off
UNKNOWN_WORDS: tuple[str, ...] = (
    "lantern", "quartz", "harbor", "velvet", "marble", "compass", "saddle", "pebble", "walnut",
    "meadow", "canyon", "glacier", "lobster", "falcon", "hammock", "thimble", "orchid", "cactus",
    "parrot", "anchor", "blanket", "candle", "carpet", "chimney", "cobweb", "cushion", "dagger",
    "emerald", "feather", "fiddle", "goblet", "granite", "helmet", "iceberg", "jacket", "kettle",
    "ladder", "lizard", "magnet", "napkin", "oyster", "paddle", "pillow", "quiver", "raccoon",
    "saucer", "scarf", "shovel", "squirrel", "tablet", "teapot", "thistle", "trumpet", "tunnel",
    "umbrella", "vessel", "wagon", "whistle", "willow", "wrench", "yacht", "zipper", "acorn",
    "badger", "basket", "beacon", "bucket", "cabin", "cannon", "cedar", "copper", "crystal",
    "donkey", "ember", "fossil", "gravel", "hazel", "ivory", "jungle", "kernel", "lagoon",
    "mantle", "nectar", "otter", "pepperoni", "quilt", "ribbon", "salmon", "sparrow", "tangerine",
    "turnip", "vulture", "waffle", "walrus", "xylophone", "yodel", "zeppelin", "blueprint",
    "crescent", "driftwood", "evergreen",
)
# fmt: on


def unknown_word_prompts(n_random: int = 100, seed: int = 4321) -> list[EvalPrompt]:
    """`Reply with: W` for English words outside the lexicon and random lowercase strings."""
    rng = random.Random(seed)
    randoms = [
        "".join(rng.choice(LOWERCASE) for _ in range(rng.randint(1, MAX_RANDOM_LETTERS)))
        for _ in range(n_random)
    ]
    out = []
    for variant, words in (("english", UNKNOWN_WORDS), ("random", randoms)):
        for w in words:
            msgs: list[Message] = [{"role": "user", "content": f"Reply with: {w}"}]
            out.append(EvalPrompt("copy", variant, msgs, None, False, w))
    return out
