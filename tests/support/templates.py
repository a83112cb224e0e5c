"""Real chat templates of the seed's tool-call families, and what they render for a call turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATES = Path(__file__).parent.parent / "fixtures" / "chat_templates"
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "units": {"type": "object"},
        "note": {"type": "string"},
    },
    "required": ["city"],
}
TIME = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in SCHEMAS.items()]
CALLS = [
    (
        "get_weather",
        {"city": "Paris", "days": 3, "units": {"temp": "c"}, "note": 'line one\nline "two" </b>'},
    ),
    ("get_time", {"zone": "Europe/Paris"}),
]


def _render(template: str, messages: list[dict[str, Any]], prompt: bool) -> str:
    return render_jinja_template(
        conversations=[messages],
        tools=TOOLS,
        chat_template=template,
        add_generation_prompt=prompt,
        bos_token="<s>",
        eos_token="</s>",
    )[0][0]


def recorded_output(name: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """What the template renders as the assistant's tool-call turn (eos and all)."""
    template = (TEMPLATES / name).read_text()
    user = {"role": "user", "content": "Weather and time in Paris?"}
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"call{i:05d}",
                "type": "function",
                "function": {"name": n, "arguments": a},
            }
            for i, (n, a) in enumerate(calls)
        ],
    }
    prompt = _render(template, [user], prompt=True)
    full = _render(template, [user, assistant], prompt=False)
    assert full.startswith(prompt)
    out = full[len(prompt) :]
    for end in ("</s>", "<|eot_id|>", "<|im_end|>\n"):
        out = out.removesuffix(end)
    return out
