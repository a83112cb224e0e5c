"""Item lists over HTTP: the query of a list (`after`, `before`, `limit`, `order`, `include`)
and the `{"object": "list", ...}` page; the core judges the values (service/item_pages.py)."""

from __future__ import annotations

from typing import Any

from mlx_responses.http_facade.kit.errors import invalid
from mlx_responses.http_facade.responses.from_proto import item_to_json
from multidict import MultiMapping

from mlx_responses.v1 import storage_service_pb2 as st

INT64_MAX = 2**63 - 1


def query_int(query: MultiMapping[str], name: str) -> int | None:
    """An integer query parameter, or a 400 naming it."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise invalid(
            f"Invalid '{name}': expected an integer, but got {raw!r}.", name, "invalid_type"
        ) from None
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise invalid(f"Invalid '{name}': {value} is out of range.", name, "invalid_value")
    return value


def include_values(query: MultiMapping[str]) -> list[str]:
    """`include` as `include=a&include=b` or as the SDKs send it, `include[]=a`."""
    return [*query.getall("include", []), *query.getall("include[]", [])]


def page_query(query: MultiMapping[str]) -> st.ItemPageQuery:
    """The page a list request asks for."""
    page = st.ItemPageQuery(include=include_values(query))
    for name in ("after", "before", "order"):
        if query.get(name) is not None:
            setattr(page, name, query[name])
    limit = query_int(query, "limit")
    if limit is not None:
        page.limit = limit
    return page


def page_to_json(page: st.ItemPage) -> dict[str, Any]:
    """OpenAI's list object."""
    return {
        "object": "list",
        "data": [item_to_json(item) for item in page.items],
        "first_id": page.first_id or None,
        "last_id": page.last_id or None,
        "has_more": page.has_more,
    }
