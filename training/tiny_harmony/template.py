"""The tiny gpt-oss model's chat template (chat_template.jinja), written from openai/harmony
`docs/format.md`.

- A system message (identity, knowledge cutoff, date, `Reasoning: <effort>`, the valid channels
  and, with tools, where calls go), then a developer message with the first system/developer
  message as `# Instructions` and the function tools as a TypeScript `namespace functions`.
- An assistant message renders its `thinking` on `analysis`, its `content` on `final` (or on
  `commentary` when `channel` says so: a preamble), and each of its `tool_calls` as a
  commentary message to `functions.NAME`, `<|constrain|>json`, ending with `<|call|>`.
  The server applies harmony's rule for which `thinking` is kept (service/text/harmony.py).
- A tool message renders as `<|start|>functions.NAME to=assistant<|channel|>commentary`
  then its content (its call found by `tool_call_id`, else the last call).
- The last assistant message of a training conversation (no generation prompt) ends with
  `<|return|>`; every earlier final answer ends with `<|end|>`.
- `reasoning_effort` (default `medium`) and `current_date` (default today) are template kwargs.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (Path(__file__).parent / "chat_template.jinja").read_text()
