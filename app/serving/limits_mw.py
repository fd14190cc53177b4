"""Request body size limits, enforced before the body is parsed."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import error_body

BULK_PATHS = ("/v1/grade/batch", "/v1/rubrics")


class BodyLimit:
    """Refuse bodies over the limit with 413: 64 KB by default, 1 MB for batch and rubric calls."""

    def __init__(self, app: ASGIApp, default: int, bulk: int) -> None:
        self.app = app
        self.default = default
        self.bulk = bulk

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
        seen = 0
        refused = False

        async def limited() -> Message:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(send, limit)

    async def _refuse(self, send: Send, limit: int) -> None:
        body = json.dumps(
            error_body("payload_too_large", f"request body is over the {limit // 1024} KB limit for this endpoint")
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass
