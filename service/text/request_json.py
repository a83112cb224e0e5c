"""A request's JSON-in-strings, parsed once where the request is validated and carried from there.

The contract carries a JSON Schema, tool parameters and chat-template kwargs as JSON text (an
exact round trip); the pipeline parses each once (service/responses/validation.py, 400s naming
the field) and hands the objects down to rendering and grammars.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class RequestJson:
    """The parsed JSON of one create request."""

    template_kwargs: JsonObject = field(default_factory=dict)
    # `text.format`: the json_schema's schema, {"type": "object"} for json_object, else None.
    answer_schema: JsonObject | None = None
    # Each function tool's `parameters` by name ({} where none were given).
    tool_parameters: dict[str, JsonObject] = field(default_factory=dict)
