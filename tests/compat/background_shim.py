"""A proxy that adds `"background": false` to every response object a server sends.

The seed gives a foreground response no `background` key; the Open Responses schema requires
one, and its suite checks a response's schema before anything else, so a case that fails on
that key alone says nothing of the rest. Run through this proxy, the same case shows what
else it would find. Only the key is added (never changed or removed): JSON bodies, SSE
`data:` lines and WebSocket messages pass through otherwise as they came. Test tooling only.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from aiohttp import web

HOP = {"host", "content-length", "transfer-encoding", "connection", "upgrade"}


def with_background(data: Any) -> Any:
    """`data` with `background: false` on each response object that has no `background`."""
    if isinstance(data, dict):
        if data.get("object") == "response" and "background" not in data:
            data["background"] = False
        for value in data.values():
            with_background(value)
    elif isinstance(data, list):
        for value in data:
            with_background(value)
    return data


def patch_text(text: str) -> str:
    """One JSON document (or anything else, returned as it was)."""
    try:
        return json.dumps(with_background(json.loads(text)))
    except ValueError:
        return text


def patch_sse_line(line: bytes) -> bytes:
    if not line.startswith(b"data:"):
        return line
    payload = line[5:].strip().decode()
    return b"data: " + patch_text(payload).encode() + b"\n"


class Shim:
    """The proxy's handlers: every method and path forwarded to `upstream`."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        url = self.upstream + request.rel_url.path_qs
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        if request.headers.get("upgrade", "").lower() == "websocket":
            return await self.websocket(request, url, headers)
        body = await request.read()
        async with self.session.request(
            request.method, url, headers=headers, data=body or None
        ) as reply:
            kind = reply.headers.get("content-type", "")
            out_headers = {k: v for k, v in reply.headers.items() if k.lower() not in HOP}
            out_headers.pop("Content-Encoding", None)
            if kind.startswith("text/event-stream"):
                stream = web.StreamResponse(status=reply.status, headers=out_headers)
                await stream.prepare(request)
                async for line in reply.content:
                    await stream.write(patch_sse_line(line))
                await stream.write_eof()
                return stream
            raw = await reply.read()
            if kind.startswith("application/json"):
                raw = patch_text(raw.decode()).encode()
            return web.Response(status=reply.status, body=raw, headers=out_headers)

    async def websocket(self, request: web.Request, url: str, headers: dict[str, str]) -> Any:
        assert self.session is not None
        client = web.WebSocketResponse()
        await client.prepare(request)
        headers = {k: v for k, v in headers.items() if not k.lower().startswith("sec-websocket")}
        async with self.session.ws_connect(url.replace("http", "ws", 1), headers=headers) as up:

            async def down() -> None:
                async for message in up:
                    if message.type == aiohttp.WSMsgType.TEXT:
                        await client.send_str(patch_text(message.data))
                    elif message.type == aiohttp.WSMsgType.BINARY:
                        await client.send_bytes(message.data)
                await client.close()

            pump = asyncio.ensure_future(down())
            async for message in client:
                if message.type == aiohttp.WSMsgType.TEXT:
                    await up.send_str(message.data)
                elif message.type == aiohttp.WSMsgType.BINARY:
                    await up.send_bytes(message.data)
            await up.close()
            await pump
        return client


@contextmanager
def shimmed(upstream: str, port: int) -> Iterator[str]:
    """The proxy on 127.0.0.1:`port` in a thread of its own; yields its base URL."""
    loop = asyncio.new_event_loop()
    shim = Shim(upstream)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", shim.handle)
    runner = web.AppRunner(app)
    ready = threading.Event()

    async def start() -> None:
        shim.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()

    thread = threading.Thread(
        target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True
    )
    thread.start()
    ready.wait(30)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:

        async def stop() -> None:
            await runner.cleanup()
            if shim.session is not None:
                await shim.session.close()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
