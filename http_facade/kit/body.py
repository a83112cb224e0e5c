"""Reads a request body: gzip and deflate decode (bounded by the body limit), others are 415.

aiohttp decodes `Content-Encoding: gzip/deflate` itself while the body is read, counting the
decoded bytes against `client_max_size` (so a compression bomb is a 413); a body that does not
decode surfaces as a payload error mid-read, answered here as a 400 in the envelope.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError
from aiohttp.web_protocol import RequestPayloadError
from mlx_responses.http_facade.kit.errors import (
    INVALID_CONTENT_ENCODING,
    UNSUPPORTED_CONTENT_ENCODING,
    OpenAIError,
)

DECODED = frozenset({"gzip", "deflate"})  # what aiohttp decodes (not x-gzip)
IDENTITY = "identity"


def unsupported_encoding(value: str) -> OpenAIError:
    """The 415 for a Content-Encoding the façade does not decode."""
    return OpenAIError(
        UNSUPPORTED_CONTENT_ENCODING,
        f"Unsupported Content-Encoding '{value}': send the body plain, gzip or deflate.",
    )


def check_encoding(request: web.BaseRequest) -> None:
    """At most one of gzip/deflate (identity aside); anything else is a 415."""
    value = request.headers.get("Content-Encoding", "")
    codings = [c.strip().lower() for c in value.split(",") if c.strip()]
    applied = [c for c in codings if c != IDENTITY]
    if len(applied) > 1 or any(c not in DECODED for c in applied):
        raise unsupported_encoding(value)


async def read_body(request: web.Request) -> bytes:
    """The decoded body; 415 for another encoding, 400 for a body that does not decode."""
    check_encoding(request)
    try:
        return await request.read()
    except (RequestPayloadError, ContentEncodingError) as exc:
        # What is left of the body cannot be decoded, so it is not read on (aiohttp would try
        # after the answer, and log the same failure again): the answer closes the connection.
        request.content.feed_eof()
        encoding = request.headers.get("Content-Encoding", "")
        raise OpenAIError(
            INVALID_CONTENT_ENCODING,
            f"The request body does not decode as Content-Encoding '{encoding}'.",
        ) from exc
