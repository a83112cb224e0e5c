"""`--allow-remote-media`: fetches the http(s) images a request names, within bounds.

Off by default: a local server should not fetch what a prompt names. When on, every http(s)
`input_image.image_url` / `input_file.file_url` of the request's input is fetched before the
prompt renders (a background job: in its queued phase), with a byte cap (`--max-media-bytes`),
a timeout (`--remote-media-timeout-secs`), no redirects (a 3xx is refused) and no connection to
a loopback, private, link-local, multicast or reserved address (checked on the addresses the
name resolves to, which are the ones connected to). A refusal is a 400 naming the part.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from mlx_responses.service.errors import invalid
from mlx_responses.service.text.media import RemoteBytes
from yarl import URL

from mlx_responses.v1 import responses_pb2 as pb

REMOTE = ("http://", "https://")


class _PublicOnly(AbstractResolver):
    """Resolves as usual, then refuses any address a server-side fetch must not reach."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        for result in results:
            address = ipaddress.ip_address(result["host"])
            if not address.is_global or address.is_multicast:
                raise _Blocked(f"{host} resolves to {address}, which is not a public address")
        return results

    async def close(self) -> None:
        await self._inner.close()


class _Blocked(Exception):
    """An address a fetch must not reach (not an OSError: aiohttp would wrap it)."""


def _check_literal(host: str) -> None:
    """An IP-literal host is connected to without resolving: checked here instead."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return  # a name: the resolver checks what it resolves to
    if not address.is_global or address.is_multicast:
        raise _Blocked(f"{address} is not a public address")


def remote_urls(items: Sequence[pb.Item]) -> list[tuple[str, str]]:
    """(url, param) of every http(s) image or file URL in the request's input."""
    found = []
    for i, item in enumerate(items):
        if item.WhichOneof("item") != "message":
            continue
        for j, part in enumerate(item.message.content):
            kind = part.WhichOneof("part")
            if kind == "input_image" and part.input_image.image_url.startswith(REMOTE):
                found.append((part.input_image.image_url, f"input[{i}].content[{j}].image_url"))
            elif kind == "input_file" and part.input_file.file_url.startswith(REMOTE):
                found.append((part.input_file.file_url, f"input[{i}].content[{j}].file_url"))
    return found


@dataclass(frozen=True)
class RemoteMedia:
    """Fetches a request's remote media; `public_only=False` is for tests on loopback."""

    max_bytes: int
    timeout_secs: float = 10.0
    public_only: bool = True

    async def fetch(self, items: Sequence[pb.Item]) -> Mapping[str, RemoteBytes]:
        """Every remote URL of `items`, fetched (each once)."""
        urls = remote_urls(items)
        if not urls:
            return {}
        fetched: dict[str, RemoteBytes] = {}
        connector = aiohttp.TCPConnector(
            resolver=_PublicOnly() if self.public_only else None, use_dns_cache=False
        )
        timeout = aiohttp.ClientTimeout(total=self.timeout_secs)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            for url, param in urls:
                if url not in fetched:
                    fetched[url] = await self._get(session, url, param)
        return fetched

    async def _get(self, session: aiohttp.ClientSession, url: str, param: str) -> RemoteBytes:
        try:
            if self.public_only:
                _check_literal(URL(url).host or "")
            async with session.get(url, allow_redirects=False) as reply:
                if 300 <= reply.status < 400:
                    raise invalid(
                        f"The media URL answered a redirect ({reply.status}); redirects are not "
                        "followed.",
                        param,
                        "invalid_image_url",
                    )
                if reply.status != 200:
                    raise invalid(
                        f"The media URL answered HTTP {reply.status}.", param, "invalid_image_url"
                    )
                data = await _bounded(reply, self.max_bytes, param)
                mime = reply.content_type.lower() if reply.content_type else ""
                return RemoteBytes(mime if mime != "application/octet-stream" else "", data)
        except _Blocked as exc:
            raise invalid(f"The media URL is refused: {exc}.", param, "invalid_image_url") from exc
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise invalid(
                f"The media URL could not be fetched: {exc or type(exc).__name__}.",
                param,
                "invalid_image_url",
            ) from exc


async def _bounded(reply: Any, limit: int, param: str) -> bytes:
    if reply.content_length is not None and reply.content_length > limit:
        raise _too_large(param, limit)
    chunks = []
    size = 0
    async for chunk in reply.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise _too_large(param, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(param: str, limit: int) -> Exception:
    return invalid(
        f"The media part is larger than this server's limit of {limit} bytes (--max-media-bytes).",
        param,
        "media_too_large",
    )
