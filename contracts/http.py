"""The one JSON error shape over HTTP, for both services' FastAPI apps."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from contracts.errors import TutorError, error_body


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
