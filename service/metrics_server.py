"""The core's own Prometheus endpoint (`--metrics-port`): GET /metrics on the event loop."""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from service.core import Core

log = logging.getLogger(__name__)


async def start_metrics_server(core: Core, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serves the core's metrics on host:port (0 picks one); returns the runner and the port.

    NOTE: on the core's own loop, not prometheus_client's thread server, so the state gauges
    read the stores and jobs on the thread that owns them.
    """

    async def metrics(request: web.Request) -> web.Response:
        body = await core.metrics.render(core)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    log.info("core metrics on http://%s:%d/metrics", host, bound)
    return runner, bound
