"""The errors both services raise (plain Python: the encoder path imports them without a web framework)."""

from __future__ import annotations

from typing import Any


class TutorError(Exception):
    """Base of domain errors: a stable code, a message for people, an HTTP status."""

    status = 400
    code = "bad_request"
    default_retry_after: int | None = None

    def __init__(self, message: str, *, details: dict[str, Any] | None = None, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after if retry_after is not None else self.default_retry_after


class UnauthorizedError(TutorError):
    """A missing, unknown or revoked API key or token."""

    status = 401
    code = "unauthorized"


class NotFoundError(TutorError):
    """An id that does not exist."""

    status = 404
    code = "not_found"


class UnavailableError(TutorError):
    """A dependency (database, index, model, worker) is not ready."""

    status = 503
    code = "unavailable"


class InvalidParamsError(TutorError):
    """Demo parameters out of bounds or unknown."""

    status = 422
    code = "invalid_request"


class QueueFullError(TutorError):
    """The demo run queue is full; retry after `retry_after` seconds."""

    status = 429
    code = "queue_full"


class RunLostError(TutorError):
    """A run id from before the worker restarted: its processes were ended with the old worker."""

    status = 410
    code = "run_lost"


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error shape used everywhere: {"error": {"code", "message", "details"}}."""
    return {"error": {"code": code, "message": message, "details": details or {}}}
