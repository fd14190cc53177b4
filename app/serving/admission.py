"""Admission control: at most N requests inside the app at once, a bounded wait for the others.

Why: a request holds a database connection from its first query to its commit, across several
worker-thread hand-overs. With more requests inside than connections, requests that hold a
connection can wait for a worker thread while every worker thread waits for a connection: the
server deadlocks (seen at 64 concurrent clients with 40 threads and 40 connections). Admitting
no more requests than there are connections (and threads) makes that impossible, and turns
overload into a queue in front of the app: a request waits its turn, and one that would wait
too long, or finds the queue full, gets 503 with Retry-After instead of hanging.

(The deadlock was seen when the API-key check was a sync dependency holding a connection. The
grading routes are now async and hold neither a thread nor a connection, but every sync route
with a session still does, and the limit still bounds the work in flight.)

Long-lived responses (server-sent events: a demo run's progress, a chat turn as it happens) would
hold a slot for their whole life, so a few dozen open streams would shut every other request out.
They take a slot only to set up: `EventStream` gives the slot back as the stream starts, and the
stream counts against its own bound instead (`StreamLimit`: at most so many open streams in the
process and per client address; 429 or 503 beyond, before any work is done). The body is read
before admission too (`app.serving.limits_mw`), so a slow upload never holds a slot either.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import ContentStream, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import RateLimitedError, TutorError, error_body

# Probes answer even when the app is saturated: a load balancer must see a busy server as alive.
EXEMPT_PATHS = ("/healthz", "/readyz")
# What ConcurrencyLimit leaves in an admitted request's scope: the call that gives its slot back early
# (at most once), and the stream tickets the request opened, closed when the request ends.
RELEASE_SLOT = "tutor.admission.release"
STREAM_TICKETS = "tutor.admission.streams"
# How long a refused stream is told to wait before it tries again.
STREAM_RETRY_S = 5


class ConcurrencyLimit:
    """ASGI middleware: `limit` requests in the app, `queue` more waiting up to `wait_s` seconds."""

    def __init__(self, app: ASGIApp, limit: int, queue: int, wait_s: float) -> None:
        if limit < 1:
            raise ValueError("the concurrency limit must be at least 1")
        self.app = app
        self.limit = limit
        self.queue = queue
        self.wait_s = wait_s
        self.waiting = 0
        self._slots = asyncio.Semaphore(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if not self._slots.locked():
            await self._slots.acquire()  # a free slot is taken at once: no timer to set and cancel
        elif self.waiting >= self.queue:
            await _refuse(send, "the server is at capacity (request queue full); retry in a moment")
            return
        else:
            self.waiting += 1
            try:
                async with asyncio.timeout(self.wait_s):
                    await self._slots.acquire()
            except TimeoutError:
                await _refuse(send, f"the server is at capacity (waited {self.wait_s:.0f} s for a turn); "
                                    "retry in a moment")
                return
            finally:
                self.waiting -= 1
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self._slots.release()

        scope[RELEASE_SLOT] = release
        try:
            await self.app(scope, receive, send)
        finally:
            release()
            for ticket in scope.get(STREAM_TICKETS, ()):
                ticket.close()  # e.g. the endpoint failed after opening its stream


async def _refuse(send: Send, message: str) -> None:
    body = json.dumps(error_body("overloaded", message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"1"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class StreamsFullError(TutorError):
    """The process has as many open event streams as it allows."""

    status = 503
    code = "overloaded"
    default_retry_after = STREAM_RETRY_S


class StreamTicket:
    """One open stream counted by a `StreamLimit`; `close` gives it back (once, from any thread)."""

    def __init__(self, limit: StreamLimit, client: str) -> None:
        self._limit = limit
        self.client = client
        self.closed = False

    def close(self) -> None:
        """Stop counting this stream."""
        self._limit._close(self)


class StreamLimit:
    """At most `total` open streams in the process and `per_client` per client address.

    Why a bound of its own: an open stream holds a connection, a relay to the demo worker and, for a
    chat turn, a worker thread while it waits for the demo, but no admission slot; this bounds them.
    """

    def __init__(self, total: int, per_client: int) -> None:
        if total < 1 or per_client < 1:
            raise ValueError("the stream limits must be at least 1")
        self.total = total
        self.per_client = per_client
        self.open_streams = 0
        self._by_client: dict[str, int] = {}
        self._lock = threading.Lock()

    def open(self, client: str) -> StreamTicket:
        """Count a new stream for `client`; 429 over the client's bound, 503 over the process's."""
        with self._lock:
            mine = self._by_client.get(client, 0)
            if mine >= self.per_client:
                raise RateLimitedError(
                    f"too many open event streams from this client (at most {self.per_client}); "
                    "close one or retry in a moment",
                    details={"open_streams_limit": self.per_client},
                    retry_after=STREAM_RETRY_S,
                )
            if self.open_streams >= self.total:
                raise StreamsFullError(
                    f"the server has as many open event streams as it allows ({self.total}); retry in a moment"
                )
            self.open_streams += 1
            self._by_client[client] = mine + 1
        return StreamTicket(self, client)

    def _close(self, ticket: StreamTicket) -> None:
        with self._lock:
            if ticket.closed:
                return
            ticket.closed = True
            self.open_streams -= 1
            left = self._by_client[ticket.client] - 1
            if left:
                self._by_client[ticket.client] = left
            else:
                del self._by_client[ticket.client]


_made = threading.Lock()


def open_stream(request: Request, total: int, per_client: int) -> StreamTicket:
    """Count a stream the request is about to open, against the app's `StreamLimit` (made on first use).

    Call it before any work for the stream is done (it raises 429 or 503 when over a bound), and
    answer with an `EventStream` holding the ticket. The ticket is closed when that stream ends, or
    when the request ends without one.
    """
    state = request.app.state
    with _made:
        limit: StreamLimit | None = getattr(state, "stream_limit", None)
        if limit is None:
            limit = state.stream_limit = StreamLimit(total, per_client)
    ticket = limit.open(request.client.host if request.client else "")
    request.scope.setdefault(STREAM_TICKETS, []).append(ticket)
    return ticket


class EventStream(StreamingResponse):
    """Server-sent events that hold a stream ticket instead of an admission slot.

    The request's slot (taken while the endpoint set the stream up) is given back as the stream
    starts; the ticket is closed when the stream ends, whether it finished or the client left.
    """

    media_type = "text/event-stream"

    def __init__(self, ticket: StreamTicket, content: ContentStream, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(content, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})})
        self.ticket = ticket

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        release = scope.get(RELEASE_SLOT)
        if release is not None:
            release()
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.ticket.close()
