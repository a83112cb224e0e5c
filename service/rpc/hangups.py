"""A caller that hangs up mid-stream is an ordinary end of an RPC, not an error in the log.

When the façade (or any client) cancels a server stream just as the servicer writes its next
message, grpc.aio fails the write inside its core and logs `ExecuteBatchError raised in core by
servicer method` at ERROR from its own logger, with a traceback, before it has marked the call
closed. The RPC is cancelled as it should be; only the log line is wrong. This filter lowers
exactly those records to INFO, without the traceback.
"""

from __future__ import annotations

import logging

GRPC_AIO_LOGGER = "grpc._cython.cygrpc"
HANGUP_MARK = "ExecuteBatchError raised in core by servicer method"


class HangupLogFilter(logging.Filter):
    """Rewrites grpc.aio's ExecuteBatchError records (a write to a gone caller) as INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        original = record.getMessage()  # however grpc splits it into a format and arguments
        if HANGUP_MARK in original:
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
            record.msg, record.args = "a caller left while its stream was written (%s)", (original,)
            record.exc_info, record.exc_text = None, None
        return True


def quiet_hangup_logs() -> None:
    """Installs the filter on grpc.aio's logger (once per process)."""
    logger = logging.getLogger(GRPC_AIO_LOGGER)
    if not any(isinstance(f, HangupLogFilter) for f in logger.filters):
        logger.addFilter(HangupLogFilter())
