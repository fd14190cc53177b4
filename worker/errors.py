"""The worker's own errors (the shape and handler are the API's: app.errors)."""

from __future__ import annotations

from app.errors import TutorError


class InvalidParamsError(TutorError):
    """Parameters out of bounds or unknown."""

    status = 422
    code = "invalid_request"


class QueueFullError(TutorError):
    """The run queue is full; retry after `retry_after` seconds."""

    status = 429
    code = "queue_full"


class RunLostError(TutorError):
    """A run id from before the worker restarted: its processes were ended with the old worker."""

    status = 410
    code = "run_lost"
