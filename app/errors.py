"""The project's errors and the one JSON shape they take over HTTP."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import InterfaceError, OperationalError

from contracts.errors import (
    InvalidParamsError,
    NotFoundError,
    QueueFullError,
    RunLostError,
    TutorError,
    UnauthorizedError,
    UnavailableError,
    error_body,
)
from contracts.http import install_error_handlers as install_shared_handlers
from contracts.http import render_tutor_error

__all__ = [
    "ConflictError",
    "ForbiddenError",
    "InvalidParamsError",
    "NotFoundError",
    "PayloadTooLargeError",
    "QueueFullError",
    "RateLimitedError",
    "RunLostError",
    "TutorError",
    "UnauthorizedError",
    "UnavailableError",
    "error_body",
    "install_error_handlers",
    "render_error",
]

log = logging.getLogger(__name__)


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


def render_error(exc: Exception) -> JSONResponse | None:
    """The response for a domain or database error; None for any other exception.

    The app's exception handlers use it, and so does the grading hot path (`app/grade_api/fastpath.py`).
    """
    if isinstance(exc, TutorError):
        return render_tutor_error(exc)
    if isinstance(exc, OperationalError | InterfaceError):
        log.error("database error: %s", exc)
        body = error_body("database_unavailable", "the database is unavailable; try again shortly")
        return JSONResponse(body, 503, headers={"Retry-After": "5"})
    return None


def install_error_handlers(app: FastAPI) -> None:
    """Turn every error into the one JSON shape: the shared handlers, and database outages as 503."""
    install_shared_handlers(app)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _database(_: Request, exc: Exception) -> JSONResponse:
        response = render_error(exc)
        assert response is not None  # registered only for the errors render_error knows
        return response
