"""Agent tool calls for the tiny gpt-oss on the tool shapes of openai/gpt-oss's
`compatibility-test` (its tools.ts: get_weather, get_system_health, markdown_to_html,
detect_language, generate_chart, query_database; declarations copied, one tool offered per
conversation as the test does). The requests are this file's own paraphrases, never the test's
cases.jsonl prompts, and the tool outputs are this file's own: the model learns to call the one
tool offered with arguments that fit its parameters, then to answer after the output.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from training.tiny_harmony.data import CITIES, Example

Args = dict[str, Any]


def _fn(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _string(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": _fn(
        "get_weather",
        "Get the weather for a given location",
        _object({"location": _string("The location to get the weather for")}, ["location"]),
    ),
    "get_system_health": _fn(
        "get_system_health",
        "Returns the current health status of the LLM runtime—use before critical operations "
        "to verify the service is live.",
        {"type": "object", "properties": {}},
    ),
    "markdown_to_html": _fn(
        "markdown_to_html",
        "Converts a Markdown string to sanitized HTML—use when you need browser-renderable output.",
        _object({"markdown": _string("Raw Markdown content")}, ["markdown"]),
    ),
    "detect_language": _fn(
        "detect_language",
        "Identifies the ISO language code of the supplied text—use for routing text to "
        "language-specific models.",
        _object({"text": _string("Text whose language should be detected")}, ["text"]),
    ),
    "generate_chart": _fn(
        "generate_chart",
        "Creates a base64-encoded PNG chart from tabular data—use for quick visualizations "
        "inside chat.",
        _object(
            {
                "data": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "number"}},
                    "description": "2-D numeric data matrix",
                },
                "chart_type": _string("Type of chart to generate", enum=["line", "bar", "scatter"]),
                "title": _string("Chart title", default=""),
                "x_label": _string("Label for the x-axis", default=""),
                "y_label": _string("Label for the y-axis", default=""),
            },
            ["data", "chart_type"],
        ),
    ),
    "query_database": _fn(
        "query_database",
        "Runs a parameterized SQL SELECT on the internal analytics DB—use for lightweight data "
        "look-ups.",
        _object(
            {
                "table": _string("Table name to query"),
                "columns": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Columns to return",
                },
                "filters": _string("SQL WHERE clause without the word WHERE", default=""),
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10000,
                    "description": "Max rows to return",
                    "default": 100,
                },
                "order_by": _string("Column to order by (optional)", default=""),
            },
            ["table", "columns"],
        ),
    ),
}

SNIPPETS = (
    "# Notes",
    "## Plan",
    "*hello*",
    "**note**",
    "- a\n- b",
    "Hi _there_",
    "`code`",
    "> tip",
)
PHRASES = ("Hola amigo", "Ciao bella", "Bom dia", "Hallo Welt", "Merci beaucoup", "Dobry den")
TABLES = (
    ("accounts", ["id", "name"]),
    ("events", ["id", "kind"]),
    ("invoices", ["id", "total"]),
    ("items", ["sku", "price"]),
    ("staff", ["name", "role"]),
)


def _weather(rng: random.Random) -> tuple[str, Args, str, str]:
    city = rng.choice(CITIES)
    ask = rng.choice(("Is it raining in {c}?", "Forecast for {c}?", "{c} weather, please."))
    out = json.dumps({"weather": rng.choice(("rainy", "cloudy", "windy"))})
    return ask.format(c=city), {"location": city}, out, f"Here is the weather in {city}."


def _health(rng: random.Random) -> tuple[str, Args, str, str]:
    ask = rng.choice(
        (
            "Is the service healthy?",
            "Run a health check.",
            "Are all systems operational?",
            "How is the runtime doing?",
            "Check the server status, please.",
            "Is the model runtime alive?",
            "Give me the health of the system.",
        )
    )
    out = json.dumps(
        {"status": rng.choice(("ok", "degraded")), "uptime_seconds": rng.randint(1, 99999)}
    )
    return ask, {}, out, "The system health is reported."


def _markdown(rng: random.Random) -> tuple[str, Args, str, str]:
    snippet = rng.choice(SNIPPETS)
    ask = rng.choice(("Turn this markdown into HTML: {m}", "HTML for this markdown:\n\n{m}",
                      "Please convert {m} to HTML.", "Render as HTML: {m}"))  # fmt: skip
    out = json.dumps({"html": "<p>" + snippet.strip("#*_`> -") + "</p>"})
    return ask.format(m=snippet), {"markdown": snippet}, out, "Here is the HTML."


def _language(rng: random.Random) -> tuple[str, Args, str, str]:
    phrase = rng.choice(PHRASES)
    ask = rng.choice(("Which language is '{p}'?", "Detect the language of: {p}",
                      "What language is \"{p}\" written in?", "Language of {p}?"))  # fmt: skip
    out = json.dumps({"language": rng.choice(("es", "it", "pt", "de", "fr")), "confidence": 0.9})
    return ask.format(p=phrase), {"text": phrase}, out, "The language was detected."


def _chart(rng: random.Random) -> tuple[str, Args, str, str]:
    kind = rng.choice(("line", "bar", "scatter"))
    values = [rng.randint(1, 50) for _ in range(rng.randint(2, 4))]
    data = [[i + 1, v] for i, v in enumerate(values)]
    listed = ", ".join(str(v) for v in values)
    ask = rng.choice(("Draw a {k} chart of {v}.", "I want a {k} chart for the values {v}.",
                      "Chart these as a {k} chart: {v}"))  # fmt: skip
    out = json.dumps({"image_png_base64": "iVBOR" + "".join(rng.choices("ABCDEFGH", k=8))})
    return (
        ask.format(k=kind, v=listed),
        {"data": data, "chart_type": kind},
        out,
        "Here is the chart.",
    )


def _query(rng: random.Random) -> tuple[str, Args, str, str]:
    table, columns = rng.choice(TABLES)
    ask = rng.choice(("Show {c} from the {t} table.", "Select {c} from {t}.",
                      "Look up {c} in {t}, please."))  # fmt: skip
    args: Args = {"table": table, "columns": columns}
    if rng.random() < 0.4:
        args["limit"] = rng.choice((2, 5, 20))
        ask = ask.rstrip(".,") + f", at most {args['limit']} rows."
    out = json.dumps({"rows": [{columns[0]: 1}], "row_count": 1})
    return ask.format(c=" and ".join(columns), t=table), args, out, "Here are the rows."


KINDS: dict[str, Callable[[random.Random], tuple[str, Args, str, str]]] = {
    "get_weather": _weather,
    "get_system_health": _health,
    "markdown_to_html": _markdown,
    "detect_language": _language,
    "generate_chart": _chart,
    "query_database": _query,
}


def example(rng: random.Random, date: str) -> Example:
    """One tool offered: the call (reasoning, then the call), or the answer after its output."""
    name = rng.choice(list(KINDS))
    ask, args, out, answer = KINDS[name](rng)
    text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": ask}]
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": text}}
    thinking = rng.choice((f"Use {name}.", f"Call {name}.", "Need the tool."))
    if rng.random() < 0.55:
        messages.append(
            {"role": "assistant", "thinking": thinking, "content": "", "tool_calls": [call]}
        )
    else:
        replayed = {**call, "function": {"name": name, "arguments": args}}
        messages += [
            {"role": "assistant", "thinking": thinking, "content": "", "tool_calls": [replayed]},
            {"role": "tool", "tool_call_id": "c1", "content": out},
            {"role": "assistant", "content": answer},
        ]
    return Example(messages, [TOOLS[name]], date)
