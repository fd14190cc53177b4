"""The one JSON error shape over HTTP, for both services' FastAPI apps, and the headers every response carries."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contracts.errors import TutorError, error_body

# Sent with every response that does not set its own:
# - nosniff: a browser takes a response as the type it says (JSON is never run as a script or shown as HTML).
# - no-referrer: pages and their links send no Referer at all. The API needs none, and URLs here carry ids
#   (conversations, runs, learners) that other sites have no business seeing; strict-origin-when-cross-origin
#   would still tell every linked site which deployment a learner came from, for no use of ours.
# - DENY: nothing here is meant to be shown in a frame (the study page says frame-ancestors 'none' too).
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)
# A JSON response without a policy of its own: loads nothing, runs nothing, is framed nowhere.
JSON_CSP = b"default-src 'none'; frame-ancestors 'none'"


def render_tutor_error(exc: TutorError) -> JSONResponse:
    """A domain error as its JSON response; a 503 without its own delay says to retry in 5 s."""
    retry = exc.retry_after if exc.retry_after is not None else (5 if exc.status == 503 else None)
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return JSONResponse(error_body(exc.code, exc.message, exc.details), exc.status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Turn domain, validation and routing errors into the one JSON shape."""

    @app.exception_handler(TutorError)
    async def _domain(_: Request, exc: TutorError) -> JSONResponse:
        return render_tutor_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [
            {"field": ".".join(str(p) for p in err["loc"] if p != "body"), "message": err["msg"]}
            for err in exc.errors()
        ]
        names = ", ".join(f["field"] for f in fields) or "request"
        return JSONResponse(error_body("invalid_request", f"invalid {names}", {"fields": fields}), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers=exc.headers)


class SecurityHeaders:
    """ASGI middleware: the security headers on every HTTP response, however it was made.

    Place it outside every other layer (`FastAPI.build_middleware_stack`): responses written by middleware
    (a body over the limit, an admission refusal, a CORS preflight) and the server-error layer's 500 then
    carry them as well. A header the response already has (the study page's Content-Security-Policy) is kept.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_security_headers(message.get("headers", []))}
            await send(message)

        await self.app(scope, receive, secured)


def with_security_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` (a response's raw ASGI headers) with those of SECURITY_HEADERS it lacks, and JSON_CSP for JSON."""
    present: set[bytes] = set()
    json = False
    for name, value in headers:  # one pass: this runs for every response
        name = name.lower()
        present.add(name)
        if name == b"content-type":
            json = value.split(b";", 1)[0].strip().lower().endswith(b"json")
    added = [header for header in SECURITY_HEADERS if header[0] not in present]
    if json and b"content-security-policy" not in present:
        added.append((b"content-security-policy", JSON_CSP))
    return [*headers, *added]


class ErrorShapeCORSMiddleware(CORSMiddleware):
    """Starlette's CORS middleware, answering a refused preflight in the error shape instead of plain text.

    Same status (400) and CORS headers as Starlette's refusal, with a message naming what was refused (the
    origin, the method, the request headers) and `details.refused` listing it. Allowed preflights and
    every other request are Starlette's own.
    """

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        text = bytes(response.body).decode("utf-8", "replace")
        refused = [part.strip() for part in text.removeprefix("Disallowed CORS ").split(",") if part.strip()]
        origin = request_headers["origin"]
        reasons = {
            "origin": f"origin {origin!r} is not allowed",
            "method": f"method {request_headers['access-control-request-method']!r} is not allowed "
                      f"(allowed: {', '.join(self.allow_methods)})",
            "headers": f"request headers {request_headers.get('access-control-request-headers', '')!r} are not all "
                       f"allowed (allowed: {', '.join(self.allow_headers)})",
            "private-network": "private-network access is not allowed",
        }
        message = "CORS preflight refused: " + "; ".join(reasons.get(r, f"{r} is not allowed") for r in refused)
        headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
        body = error_body("cors_refused", message, {"refused": refused, "origin": origin})
        return JSONResponse(body, response.status_code, headers=headers)
