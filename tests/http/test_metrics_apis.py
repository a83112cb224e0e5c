"""The façade counts generation requests by API (responses, chat, completions, messages)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.http.test_metrics import scrape, value
from tests.support.stack import Stack


def test_requests_are_counted_by_api(stack: Stack) -> None:
    base, model = stack.base_url, stack.settings.models[0].name
    before = scrape(f"{base}/metrics")
    user: Any = [{"role": "user", "content": "Reply with: hi"}]
    calls: list[tuple[str, dict[str, Any], str, str]] = [
        ("/v1/responses", {"input": "Reply with: hi", "max_output_tokens": 2}, "responses", "200"),
        ("/v1/chat/completions", {"messages": user, "max_tokens": 2}, "chat.completions", "200"),
        ("/chat/completions", {"messages": []}, "chat.completions", "400"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 2}, "completions", "200"),
        ("/v1/messages", {"messages": user, "max_tokens": 2}, "messages", "200"),
        ("/v1/messages/count_tokens", {"messages": user}, "messages", "200"),
    ]
    for path, body, _, status in calls:
        reply = httpx.post(f"{base}{path}", json={"model": model, **body}, timeout=60)
        assert str(reply.status_code) == status, reply.text
    after = scrape(f"{base}/metrics")
    name = "mlx_responses_api_requests_total"
    expected: dict[tuple[str, str], int] = {}
    for _, _, api, status in calls:
        expected[(api, status)] = expected.get((api, status), 0) + 1
    for (api, status), count in expected.items():
        moved = value(after, name, api=api, status=status) - value(
            before, name, api=api, status=status
        )
        assert moved >= count, (api, status)
    models = value(after, name, api="models", status="200")
    assert models == 0, "only generation APIs are labelled"
