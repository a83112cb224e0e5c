"""The pieces the dialects share: decoding, tools, request handling, errors, SSE framing."""
