"""POST /v1/grade without FastAPI's per-request machinery: the grading API's hot path.

The route in `endpoints.py` stays the documented one (OpenAPI) and serves whatever this path passes on. This path
answers well-formed JSON calls itself: it validates the body with the same model, authenticates and rate-limits with
the same dependency function, and grades, stores and answers with the same functions as the route. Routing,
dependency solving and the exception middleware cost more CPU per answer than the rest of the request outside the
encoder; on two cores that CPU is taken from the encoder (measured by `bench/bench_floor.py`; docs/PERFORMANCE.md,
"The grading API's hot path").

A body that does not validate is passed on to the route, which answers with the project's 422
(nothing has been counted or stored by then). Errors raised after that are rendered by the same
function as the app's exception handlers.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import render_error
from app.grade_api.endpoints import grade_one_response
from app.grade_api.schemas import GradeIn
from app.keys.deps import API_KEY_HEADER, rate_limiter_of, require_api_key
from app.serving.limits_mw import replay_body

PATH = "/v1/grade"


class GradeFastPath:
    """ASGI middleware: serves POST /v1/grade with a JSON body; everything else goes to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        content_type, secret = _headers(scope)
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            await self.app(scope, receive, send)
            return
        body = await _body(receive)
        try:
            item = GradeIn.model_validate_json(body)
        except ValidationError:  # the route answers with the project's 422 shape
            await self.app(scope, replay_body(body, receive), send)
            return
        state = scope["app"].state
        runtime = state.runtime
        response: Response
        try:
            key = await require_api_key(runtime, rate_limiter_of(state, runtime), secret)
            response = await grade_one_response(runtime, key, item)
        except Exception as exc:
            error = render_error(exc)
            if error is None:
                raise
            response = error
        await response(scope, receive, send)


_KEY_HEADER = API_KEY_HEADER.lower().encode("latin-1")


def _headers(scope: Scope) -> tuple[str, str | None]:
    """The content type ("" if none) and the API key (None if none): the first of each, as the route reads them.

    One pass over the raw headers (the server gives their names in lower case) instead of a
    Starlette `Request` and its `Headers`.
    """
    content_type: bytes | None = None
    secret: bytes | None = None
    for name, value in scope["headers"]:
        if name == b"content-type" and content_type is None:
            content_type = value
        elif name == _KEY_HEADER and secret is None:
            secret = value
    return ((content_type or b"").decode("latin-1"),
            None if secret is None else secret.decode("latin-1"))


async def _body(receive: Receive) -> bytes:
    """The whole request body (Starlette's `Request.body`, without the request object and its stream)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
