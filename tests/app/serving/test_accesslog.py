"""The access log: one line per request in uvicorn's format with its duration, written after the response."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from starlette.types import Message, Receive, Scope, Send

from app.serving.accesslog import LOGGER, AccessLog, TimedAccessFormatter, request_target


class _Events(logging.Handler):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events
        self.setFormatter(TimedAccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s',
                                               use_colors=False))

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append("logged: " + self.format(record))


@pytest.fixture
def events() -> Iterator[list[str]]:
    out: list[str] = []
    logger = logging.getLogger(LOGGER)
    handler = _Events(out)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield out
    logger.removeHandler(handler)
    logger.setLevel(old_level)
    logger.propagate = old_propagate


def _scope(path: str = "/v1/grade", query: bytes = b"") -> Scope:
    return {"type": "http", "method": "POST", "path": path, "query_string": query, "http_version": "1.1",
            "client": ("127.0.0.1", 5000), "headers": []}


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _run(app: AccessLog, scope: Scope, events: list[str]) -> None:
    async def send(message: Message) -> None:
        events.append(message["type"])

    asyncio.run(app(scope, _receive, send))


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}", "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def test_a_request_is_logged_once_after_its_last_byte_in_uvicorns_format_with_its_duration(events: list[str]) -> None:
    _run(AccessLog(_ok), _scope(query=b"x=1"), events)
    assert events[:3] == ["http.response.start", "http.response.body", "http.response.body"]
    assert len(events) == 4
    line = events[3]
    assert line.startswith('logged: 127.0.0.1:5000 - "POST /v1/grade?x=1 HTTP/1.1" 200 OK ')
    assert line.endswith(" ms") and float(line.split()[-2]) >= 0


def test_a_handler_that_raises_is_logged_as_the_500_answered_for_it(events: list[str]) -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        _run(AccessLog(broken), _scope(), events)
    assert len(events) == 1 and '"POST /v1/grade HTTP/1.1" 500 Internal Server Error' in events[0]


def test_nothing_is_logged_or_wrapped_when_the_logger_is_off() -> None:
    seen: list[Send] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(send)

    async def send(message: Message) -> None:  # pragma: no cover - never called
        pass

    logger = logging.getLogger(LOGGER)
    old = logger.level
    logger.setLevel(logging.WARNING)
    try:
        asyncio.run(AccessLog(app)(_scope(), _receive, send))
    finally:
        logger.setLevel(old)
    assert seen == [send]  # the server's own send, not a logging wrapper


def test_the_logged_target_is_the_raw_path_when_the_server_gives_one() -> None:
    scope = {**_scope(path="/v1/a b"), "raw_path": b"/v1/a%20b", "query_string": b'q="x"'}
    assert request_target(scope) == "/v1/a%20b?q=%22x%22"
    assert request_target(_scope(path="/v1/a b")) == "/v1/a%20b"  # without it, the path percent-encoded
