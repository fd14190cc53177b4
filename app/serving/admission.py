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
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import error_body

# Probes answer even when the app is saturated: a load balancer must see a busy server as alive.
EXEMPT_PATHS = ("/healthz", "/readyz")


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
        try:
            await self.app(scope, receive, send)
        finally:
            self._slots.release()


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
