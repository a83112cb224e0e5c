"""Images on Chat Completions and Anthropic Messages: their parts as `input_image`, and the core's
errors about those parts named back in the dialect's own terms.

Chat's `image_url` part and Anthropic's `image` block become the `input_image` part Responses
sends, so the core decodes, bounds, counts and caches them on one path. The core names a part
`input[i].content[j]` (its `input` items); `MediaPaths` remembers where each image stood in the
request the client sent (`messages[1].content[2]`) and rewrites an error's param and message.
It remembers where each tool output stood too (Chat's `tool` message, Anthropic's `tool_result`
block, both a `function_call_output` item in the core), so the core's refusal of an output that
answers no call (`input[i]`) names the message or block and its id field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mlx_responses.http_facade.kit.errors import OpenAIError

from mlx_responses.v1 import responses_pb2 as pb

# The core's name of a part: `input[3].content[1]` (then `.image_url`, `.type`, or nothing).
CORE_PART = re.compile(r"input\[(\d+)\]\.content\[(\d+)\]((?:\.[a-z_]+)?)")
# The core's name of a whole item: `input[3]`.
CORE_ITEM = re.compile(r"input\[(\d+)\]")
# What `detail` an image may ask for (OpenAI's).
IMAGE_DETAILS = ("auto", "low", "high", "original")
# The core item a dialect's tool output becomes.
OUTPUT = "function_call_output"


@dataclass(frozen=True)
class _Where:
    """Where one image (or tool output) stood in the dialect's request, and its URL (or id)
    field's path there."""

    path: str
    url_field: str
    kind: str


@dataclass
class MediaPaths:
    """The dialect path of each image part, in the order the decoder added them to `input`."""

    dialect: str
    noun: str  # "Content part" (chat) or "Content block" (Anthropic)
    _found: list[_Where] = field(default_factory=list)
    # Tool outputs, in the order the decoder added them: path, id field, the dialect's noun.
    _outputs: list[_Where] = field(default_factory=list)

    def add(self, path: str, url_field: str, kind: str) -> None:
        self._found.append(_Where(path, url_field, kind))

    def add_output(self, path: str, id_field: str, noun: str) -> None:
        """A tool output (`function_call_output` in the core) stood at `path`."""
        self._outputs.append(_Where(path, id_field, noun))

    def _output_at(self, items: Any, index: int) -> _Where | None:
        """Where the core's `input[index]`, a tool output, stood."""
        outputs = (i for i, item in enumerate(items) if item.WhichOneof("item") == OUTPUT)
        for where, i in zip(self._outputs, outputs, strict=False):
            if i == index:
                return where
        return None

    def _rename_output(self, error: OpenAIError, params: pb.CreateResponseParams) -> OpenAIError:
        """The core's refusal of a tool output that answers no call, in the dialect's terms."""
        match = CORE_ITEM.fullmatch(error.param or "")
        where = self._output_at(params.input, int(match[1])) if match else None
        if where is None:
            return error
        param = f"{where.path}{where.url_field}"
        message = error.message.replace("function call output", where.kind).replace(
            "call_id", where.url_field.lstrip(".")
        )
        if self.dialect == "anthropic":
            message = f"{param}: {message}"
        return OpenAIError(error.kind, message, param=param, code=error.code)

    def _by_core_path(self, items: Any) -> dict[tuple[int, int], _Where]:
        found = iter(self._found)
        table = {}
        for i, item in enumerate(items):
            if item.WhichOneof("item") != "message":
                continue
            for j, part in enumerate(item.message.content):
                if part.WhichOneof("part") == "input_image":
                    where = next(found, None)
                    if where is not None:
                        table[(i, j)] = where
        return table

    def rename(self, error: OpenAIError, params: pb.CreateResponseParams) -> OpenAIError:
        """`error` with the core's `input[i].content[j]` (or tool output `input[i]`) names in
        the dialect's terms."""
        if self._outputs and error.param and CORE_ITEM.fullmatch(error.param):
            return self._rename_output(error, params)
        if not self._found:
            return error
        table = self._by_core_path(params.input)

        def dialect(match: re.Match[str]) -> str:
            where = table.get((int(match[1]), int(match[2])))
            if where is None:
                return match[0]
            suffix = match[3]
            if suffix == ".type":
                return f"{where.path}.type"
            return f"{where.path}{where.url_field}" if suffix else where.path

        param = CORE_PART.sub(dialect, error.param) if error.param else error.param
        message = CORE_PART.sub(dialect, error.message)
        kinds = {w.kind for w in table.values()}
        if len(kinds) == 1:
            message = message.replace("Content part type 'input_image'", self._noun(kinds.pop()))
        renamed = param != error.param
        if renamed and param and param not in message and self.dialect == "anthropic":
            # Anthropic's envelope has no `param`: the message names the part.
            message = f"{param}: {message}"
        if param == error.param and message == error.message:
            return error
        return OpenAIError(error.kind, message, param=param, code=error.code)

    def _noun(self, kind: str) -> str:
        return f"{self.noun} type '{kind}'"


def url_image(url: str, detail: str) -> pb.ContentPart:
    """An `input_image` part of a URL (a data: URL too), as the core takes it."""
    return pb.ContentPart(input_image=pb.VisionInputImage(image_url=url, detail=detail))
