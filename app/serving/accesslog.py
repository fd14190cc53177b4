"""The access log of `tutor serve`: one line per request, written once its response has been sent.

uvicorn logs a request when its response starts, before the first byte is written, so every response waited for its
own log record (about 0.09 ms of a graded answer at one client on a 2-core machine; `bench/bench_api.py`,
docs/PERFORMANCE.md, "The grading API's hot path"). This middleware logs after the last byte has been handed to the
socket, in uvicorn's format, with how long the request took:

    INFO:     127.0.0.1:53422 - "POST /v1/grade HTTP/1.1" 200 OK 6.4 ms

`tutor serve` turns uvicorn's own access log off and gives the `app.access` logger uvicorn's
access handler instead (`access_handler`), so each request is logged once. A request whose
handler raised before answering is logged as the 500 that uvicorn's error middleware sends.
"""

from __future__ import annotations

import logging
import time
from typing import Any, cast
from urllib.parse import quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter
from uvicorn.protocols.utils import get_client_addr

LOGGER = "app.access"
log = logging.getLogger(LOGGER)


class AccessLog:
    """ASGI middleware: logs each HTTP request after its response has been sent (outermost)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def logged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, logged)
        finally:  # status 0: the handler raised before answering, and the error middleware answers 500
            _log(scope, status, time.perf_counter() - start)


def request_target(scope: Scope) -> str:
    """The path and query as uvicorn's access line shows them. `raw_path` is optional in ASGI (some
    servers and test clients leave it out; uvicorn's own helper then fails), so the path stands in."""
    raw = scope.get("raw_path")
    path = raw.decode("latin1") if raw else quote(scope.get("root_path", "") + scope["path"])
    if scope.get("query_string"):
        path = f"{path}?{scope['query_string'].decode('ascii')}"
    return path.replace('"', "%22")


def _log(scope: Scope, status: int, seconds: float) -> None:
    http = cast(Any, scope)  # uvicorn's helpers are typed for its own scope TypedDicts
    # The arguments uvicorn's AccessFormatter expects, as uvicorn makes them, and the duration beside them.
    log.info('%s - "%s %s HTTP/%s" %d', get_client_addr(http), scope["method"], request_target(scope),
             scope["http_version"], status or 500, extra={"duration_ms": seconds * 1000})


class TimedAccessFormatter(AccessFormatter):
    """uvicorn's access line, followed by the request's duration when the record has one."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        duration = getattr(record, "duration_ms", None)
        return line if duration is None else f"{line} {duration:.1f} ms"


def access_handler(use_colors: bool | None = None) -> None:
    """Give `app.access` a stderr handler in uvicorn's access format (with durations); idempotent."""
    if log.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(TimedAccessFormatter(LOGGING_CONFIG["formatters"]["access"]["fmt"], use_colors=use_colors))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
