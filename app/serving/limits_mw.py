"""Request body limits: size and time, enforced before the body is parsed and before admission.

The whole body is read here, within `timeout_s` seconds, and handed on to the app once complete. So a
client that sends its body slowly (a byte every few seconds) holds a connection and a buffer of at
most the size limit, never an admission slot (`app.serving.admission` sits inside this layer): it
gets 408 once the time is up, and its connection is closed.
"""

from __future__ import annotations

import asyncio
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import error_body

BULK_PATHS = ("/v1/grade/batch", "/v1/rubrics")
# A body over its size limit, or late, is not read to its end: the connection is closed after the answer.
_CLOSE = (b"connection", b"close")


class BodyLimit:
    """Refuse bodies over the limit with 413 (64 KB by default, 1 MB for batch and rubric calls), and
    bodies that take more than `timeout_s` seconds to arrive with 408."""

    def __init__(self, app: ASGIApp, default: int, bulk: int, timeout_s: float = 10.0) -> None:
        if timeout_s <= 0:
            raise ValueError("the body timeout must be positive")
        self.app = app
        self.default = default
        self.bulk = bulk
        self.timeout_s = timeout_s

    def _limit(self, path: str) -> int:
        return self.bulk if path.rstrip("/") in BULK_PATHS else self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope["path"])
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self._refuse(send, limit)
            return
        chunks: list[bytes] = []
        seen = 0
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client went away before its body was complete: nobody to answer
                    chunk = message.get("body", b"")
                    seen += len(chunk)
                    if seen > limit:
                        await self._refuse(send, limit)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _answer(send, 408, "request_timeout",
                          f"the request body did not arrive within {self.timeout_s:g} s", close=True)
            return
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        await self.app(scope, replay_body(body, receive), send)

    async def _refuse(self, send: Send, limit: int) -> None:
        await _answer(send, 413, "payload_too_large",
                      f"request body is over the {limit // 1024} KB limit for this endpoint", close=True)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the whole body at once, then defers to the server's (which reports a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(send: Send, status: int, code: str, message: str, *, close: bool = False) -> None:
    body = json.dumps(error_body(code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append(_CLOSE)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
