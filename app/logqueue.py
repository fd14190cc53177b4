"""Log records written by a background thread, so the event loop never waits on stderr.

Every request writes an access-log line. Written on the event loop, a slow or full stderr (a
pipe nobody drains, a slow terminal or log shipper) stalls every request. Records go through an
in-process queue instead, and one listener thread per logger writes them with the logger's own
handlers (and formatters, so uvicorn's access format is kept). On a fast stderr the difference
was within this machine's noise.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterable
from logging.handlers import QueueHandler, QueueListener


class _PassThrough(QueueHandler):
    """Queue the record as it is: the listener's handlers format it (the queue never leaves the process)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def log_off_the_loop(names: Iterable[str] = ("uvicorn.access", "uvicorn.error", "")) -> list[QueueListener]:
    """Move each named logger's handlers behind a queue; returns the started listeners (stop them at exit)."""
    listeners = []
    for name in names:
        logger = logging.getLogger(name or None)
        handlers = [h for h in logger.handlers if not isinstance(h, QueueHandler)]
        if not handlers:
            continue
        records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        for handler in handlers:
            logger.removeHandler(handler)
        logger.addHandler(_PassThrough(records))
        listener = QueueListener(records, *handlers, respect_handler_level=True)
        listener.start()
        listeners.append(listener)
    return listeners
