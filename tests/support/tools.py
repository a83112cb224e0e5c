"""Function tools the tests send: one definition each, shared by the HTTP test modules."""

from __future__ import annotations

from typing import Any

WEATHER: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather of a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
# The same tool with a closed object, as strict clients send it.
WEATHER_STRICT: dict[str, Any] = {
    **WEATHER,
    "parameters": {**WEATHER["parameters"], "additionalProperties": False},
}
