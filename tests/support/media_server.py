"""A local HTTP server of test media (stdlib, its own thread): an image, a redirect, a large
body and a slow one, for the --allow-remote-media tests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    image = b""

    def do_GET(self) -> None:
        if self.path == "/image.png":
            self._reply(200, self.image, "image/png")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/image.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/large":
            self._reply(200, b"\0" * (1 << 20), "image/png")
        elif self.path == "/slow":
            time.sleep(3)
            self._reply(200, self.image, "image/png")
        else:
            self._reply(404, b"", "text/plain")

    def _reply(self, status: int, body: bytes, mime: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # The client may give up (the size cap, the timeout): what the tests want.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(image: bytes) -> Iterator[str]:
    """Serves the routes above on 127.0.0.1; yields the base URL."""
    handler = type("Handler", (_Handler,), {"image": image})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
