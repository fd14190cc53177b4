"""The project's errors and the one JSON shape they take over HTTP."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class TutorError(Exception):
    """Base of domain errors: a stable code, a message for people, an HTTP status."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


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


def install_error_handlers(app: FastAPI) -> None:
    """Turn every error into the one JSON shape."""

    @app.exception_handler(TutorError)
    async def _tutor(_: Request, exc: TutorError) -> JSONResponse:
        headers = {"Retry-After": "5"} if exc.status == 503 else None
        return JSONResponse(error_body(exc.code, exc.message, exc.details), exc.status, headers=headers)

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
