"""Log records written by a background thread, so the event loop never waits on stderr.

Every request writes an access-log line. Written on the event loop, a slow or full stderr (a
pipe nobody drains, a slow terminal or log shipper) stalls every request. Records go through an
in-process queue instead, and one listener thread per logger writes them with the logger's own
handlers (and formatters, so uvicorn's access format is kept). On a fast stderr the difference
was within this machine's noise.

The queue is bounded: while the output is blocked, records beyond `max_queued` are dropped and
counted (memory stays bounded, logging never blocks), and the first record queued after that
is preceded by a warning saying how many were lost.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Iterable
from logging.handlers import QueueHandler, QueueListener

MAX_QUEUED = 10_000
# What `tutor serve` logs: the access log (app.serving.accesslog), uvicorn's server lines, the project's loggers.
SERVING_LOGGERS = ("app.access", "uvicorn", "app", "ingest")


def project_log_handlers(level: int = logging.INFO) -> None:
    """Give the project's loggers (app.*, ingest.*) a stderr handler in uvicorn's style, with the logger's name.

    Without one, their records reached only Python's last-resort handler: warnings and errors as
    bare messages, and nothing at INFO (a reload of the bank, say).
    """
    from uvicorn.logging import DefaultFormatter

    for name in ("app", "ingest"):
        logger = logging.getLogger(name)
        if logger.handlers:
            continue
        handler = logging.StreamHandler()
        handler.setFormatter(DefaultFormatter("%(levelprefix)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False


class _PassThrough(QueueHandler):
    """Queue the record as it is (the listener's handlers format it); drop and count it when the queue is full."""

    def __init__(self, records: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(records)
        self.queue: queue.Queue[logging.LogRecord] = records
        self.dropped = 0
        self._lock = threading.Lock()

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        with self._lock:
            try:
                if self.dropped:
                    self.queue.put_nowait(self._dropped_notice(record))
                    self.dropped = 0
                self.queue.put_nowait(record)
            except queue.Full:
                self.dropped += 1

    def _dropped_notice(self, after: logging.LogRecord) -> logging.LogRecord:
        return logging.LogRecord(after.name, logging.WARNING, __file__, 0,
                                 "%d log records were dropped: the log output did not keep up", (self.dropped,), None)


class _Listener(QueueListener):
    """A listener whose stop does not hang or fail when the output is blocked and the queue full."""

    def stop(self, timeout_s: float = 5.0) -> None:
        thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(queue.Full):  # the output is stuck: give up on what is queued
            self.queue.put(self._sentinel, timeout=timeout_s)  # type: ignore[attr-defined]
        thread.join(timeout_s)
        self._thread = None


def log_off_the_loop(names: Iterable[str] = SERVING_LOGGERS,
                     max_queued: int = MAX_QUEUED) -> list[QueueListener]:
    """Move each named logger's handlers behind a queue; returns the started listeners (stop them at exit)."""
    listeners: list[QueueListener] = []
    for name in names:
        logger = logging.getLogger(name or None)
        handlers = [h for h in logger.handlers if not isinstance(h, QueueHandler)]
        if not handlers:
            continue
        records: queue.Queue[logging.LogRecord] = queue.Queue(max_queued)
        for handler in handlers:
            logger.removeHandler(handler)
        logger.addHandler(_PassThrough(records))
        listener = _Listener(records, *handlers, respect_handler_level=True)
        listener.start()
        listeners.append(listener)
    return listeners
