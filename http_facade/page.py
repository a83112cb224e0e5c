"""GET /: the page a person opens in a browser (http_facade/page/: static, served as shipped).

It talks to the server through the public API only, with the key typed into it (kept in the
browser): the page and its two files are open, like /health, because they hold nothing but
code; everything they show comes from the API the key opens. A Content-Security-Policy keeps
the page to this origin (no CDN, no inline script) and its images to pasted ones (data:).
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

# The files, by the path they are served at.
FILES = {
    "/": ("index.html", "text/html"),
    "/page/app.js": ("app.js", "text/javascript"),
    "/page/style.css": ("style.css", "text/css"),
}
PAGE_PATHS = frozenset(FILES)
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return (resources.files("mlx_responses.http_facade") / "page" / name).read_bytes()


async def page_file(request: web.Request) -> web.Response:
    """One of the page's files, as shipped in the package."""
    name, content_type = FILES[request.path]
    return web.Response(
        body=_read(name), content_type=content_type, charset="utf-8", headers=HEADERS
    )


def add_page_routes(app: web.Application) -> None:
    for path in FILES:
        app.router.add_get(path, page_file)
