"""The façade's Prometheus metrics (requests by route, API and status; latency), GET /metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

PREFIX = "mlx_responses_"
# Another registry's exposition (the core's, when both run in one process).
MetricsSource = Callable[[], Awaitable[bytes]]
# The cores the façade routes to: (address, whether its health watch last said SERVING).
CoreStates = Callable[[], Sequence[tuple[str, bool]]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class FacadeMetrics:
    """The façade's own registry (one per app, so several apps can share a process)."""

    def __init__(self, extra: MetricsSource | None = None) -> None:
        self.registry = CollectorRegistry()
        self.extra = extra
        labels = ("method", "route")
        self.requests = Counter(
            f"{PREFIX}http_requests",
            "HTTP requests answered, by route template and status.",
            (*labels, "status"),
            registry=self.registry,
        )
        self.duration = Histogram(
            f"{PREFIX}http_request_duration_seconds",
            "Time to answer an HTTP request (to the last byte of a stream).",
            labels,
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.api_requests = Counter(
            f"{PREFIX}api_requests",
            "Generation API requests answered, by API and status.",
            ("api", "status"),
            registry=self.registry,
        )
        self.in_progress = Gauge(
            f"{PREFIX}http_requests_in_progress",
            "HTTP requests being answered.",
            labels,
            registry=self.registry,
        )

    def watch_cores(self, states: CoreStates) -> None:
        """Reports each core's serving state as the façade's health watch last saw it."""
        self.registry.register(_Cores(states))

    async def render(self) -> bytes:
        body = generate_latest(self.registry)
        if self.extra is not None:
            body += await self.extra()
        return body


class _Cores:
    """A collector of the cores' serving states, read at each scrape."""

    def __init__(self, states: CoreStates) -> None:
        self.states = states

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            f"{PREFIX}core_serving",
            "1 while the façade's health watch on a core says it serves, else 0 (the façade "
            "routes requests to the serving cores).",
            labels=("core",),
        )
        for address, serving in self.states():
            family.add_metric([address], 1.0 if serving else 0.0)
        yield family


METRICS = web.AppKey("metrics", FacadeMetrics)


def _route(request: web.Request) -> str:
    """The route template (bounded label values), not the concrete path."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


# Route prefixes (after /v1) of each generation API, most specific first.
API_ROUTES = (
    ("/chat/completions", "chat.completions"),
    ("/completions", "completions"),
    ("/messages", "messages"),
    ("/responses", "responses"),
)


def api_of(route: str) -> str | None:
    """The API a route template belongs to (`responses`, `chat.completions`, ...), if any."""
    path = route.removeprefix("/v1")
    return next((api for prefix, api in API_ROUTES if path.startswith(prefix)), None)


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Counts every request by route and final status, and times it."""
    metrics = request.app[METRICS]
    labels = (request.method, _route(request))
    started = time.perf_counter()
    status = "cancelled"  # the client left before an answer
    metrics.in_progress.labels(*labels).inc()
    try:
        response = await handler(request)
        status = str(response.status)
        return response
    except web.HTTPException as exc:
        status = str(exc.status)
        raise
    except asyncio.CancelledError:
        raise
    finally:
        metrics.in_progress.labels(*labels).dec()
        metrics.requests.labels(*labels, status).inc()
        api = api_of(labels[1])
        if api is not None:
            metrics.api_requests.labels(api, status).inc()
        metrics.duration.labels(*labels).observe(time.perf_counter() - started)


async def metrics_endpoint(request: web.Request) -> web.Response:
    """GET /metrics: the façade's metrics, then the core's when it runs in this process."""
    body = await request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def install_metrics(app: web.Application, extra: MetricsSource | None = None) -> None:
    """Adds the metrics middleware (outside the error middleware) and GET /metrics."""
    app[METRICS] = FacadeMetrics(extra)
    app.middlewares.insert(0, metrics_middleware)
    app.router.add_get("/metrics", metrics_endpoint)
