"""The project's errors and the one JSON shape they take over HTTP."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ingest.batching import OverloadedError

log = logging.getLogger(__name__)


class TutorError(Exception):
    """Base of domain errors: a stable code, a message for people, an HTTP status."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after


class UnauthorizedError(TutorError):
    """A missing, unknown or revoked API key."""

    status = 401
    code = "unauthorized"


class ForbiddenError(TutorError):
    """A valid key without the scope, or a learner token that does not own the resource."""

    status = 403
    code = "forbidden"


class ConflictError(TutorError):
    """The request conflicts with what is stored (e.g. a question already answered)."""

    status = 409
    code = "conflict"


class PayloadTooLargeError(TutorError):
    """A body or a field over its size limit."""

    status = 413
    code = "payload_too_large"


class RateLimitedError(TutorError):
    """Too many requests for this key; retry after `retry_after` seconds."""

    status = 429
    code = "rate_limited"


class NotFoundError(TutorError):
    """An id that does not exist."""

    status = 404
    code = "not_found"


class UnavailableError(TutorError):
    """A dependency (database, index, model, worker) is not ready."""

    status = 503
    code = "unavailable"


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error shape used everywhere: {"error": {"code", "message", "details"}}."""
    return {"error": {"code": code, "message": message, "details": details or {}}}


def render_error(exc: Exception) -> JSONResponse | None:
    """The response for a domain, overload or database error; None for any other exception.

    The app's exception handlers use it, and so does the grading hot path (`app/grade_api/fastpath.py`).
    """
    if isinstance(exc, TutorError):
        retry = exc.retry_after if exc.retry_after is not None else (5 if exc.status == 503 else None)
        headers = {"Retry-After": str(retry)} if retry is not None else None
        return JSONResponse(error_body(exc.code, exc.message, exc.details), exc.status, headers=headers)
    if isinstance(exc, OverloadedError):
        return JSONResponse(error_body("overloaded", str(exc)), 503, headers={"Retry-After": "1"})
    if isinstance(exc, OperationalError | InterfaceError):
        log.error("database error: %s", exc)
        body = error_body("database_unavailable", "the database is unavailable; try again shortly")
        return JSONResponse(body, 503, headers={"Retry-After": "5"})
    return None


def install_error_handlers(app: FastAPI) -> None:
    """Turn every error into the one JSON shape."""

    @app.exception_handler(TutorError)
    @app.exception_handler(OverloadedError)
    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _known(_: Request, exc: Exception) -> JSONResponse:
        response = render_error(exc)
        assert response is not None  # registered only for the errors render_error knows
        return response

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
