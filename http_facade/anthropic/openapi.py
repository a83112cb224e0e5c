"""The OpenAPI schemas and operations of Anthropic Messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from http_facade.openapi_kit import Operation, Schema


def operations() -> dict[Callable[..., Any], Operation]:
    return {}


def schemas() -> dict[str, Schema]:
    return {}
