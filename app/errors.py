"""The project's errors and the one JSON shape they take over HTTP."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError

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
    "db_error_summary",
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


def db_error_summary(exc: BaseException) -> str:
    """A database error for the logs without its statement or parameters (which hold learners' answers).

    The exception's class, the driver's error class and the SQLSTATE when the server gave one, e.g.
    "DataError (psycopg.DataError, SQLSTATE 22021)". For a lost or busy database (OperationalError,
    InterfaceError) the driver's first line follows ("connection refused", "database is locked"); for any
    other error it is left out, as PostgreSQL quotes the refused value in some ("invalid input syntax ...").
    Anything that is not a database error: its class and message.
    """
    if not isinstance(exc, DBAPIError):
        return f"{type(exc).__name__}: {exc}"
    orig = exc.orig
    driver = f"{type(orig).__module__.split('.')[0]}.{type(orig).__name__}" if orig is not None else "no driver error"
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    summary = f"{type(exc).__name__} ({driver}{f', SQLSTATE {state}' if state else ''})"
    if isinstance(exc, OperationalError | InterfaceError) and orig is not None:
        first = str(orig).strip().splitlines()
        summary += f": {first[0]}" if first else ""
    return summary


def render_error(exc: Exception) -> JSONResponse | None:
    """The response for a domain or database error; None for any other exception.

    The app's exception handlers use it, and so does the grading hot path (`app/grade_api/fastpath.py`).
    A value the database refuses (`DataError`: a NUL in text, a number out of range, text too long for its
    column) is the request's fault: 422 in the error shape, naming neither the statement nor the value.
    """
    if isinstance(exc, TutorError):
        return render_tutor_error(exc)
    if isinstance(exc, OperationalError | InterfaceError):
        log.error("database error: %s", db_error_summary(exc))
        body = error_body("database_unavailable", "the database is unavailable; try again shortly")
        return JSONResponse(body, 503, headers={"Retry-After": "5"})
    if isinstance(exc, DataError):
        log.warning("the database refused a value of a request: %s", db_error_summary(exc))
        body = error_body("invalid_request", "the request holds a value that cannot be stored or searched for")
        return JSONResponse(body, 422)
    return None


def install_error_handlers(app: FastAPI) -> None:
    """Turn every error into the one JSON shape: the shared handlers, database outages as 503 and
    values the database refuses as 422."""
    install_shared_handlers(app)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    @app.exception_handler(DataError)
    async def _database(_: Request, exc: Exception) -> JSONResponse:
        response = render_error(exc)
        assert response is not None  # registered only for the errors render_error knows
        return response
