"""The API's client of the demo worker: a timeout on every call, worker errors mapped to the project's errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from app.config import Settings
from app.errors import InvalidParamsError, NotFoundError, QueueFullError, UnavailableError

RETRY_AFTER_S = 5
# the worker sends a keep-alive comment every 5 s; a stream silent for longer is dead
STREAM_READ_TIMEOUT_S = 15.0


class RunLost(Exception):
    """The worker restarted after this run was submitted."""


def _error_parts(response: httpx.Response) -> tuple[str, dict[str, Any]]:
    try:
        error = response.json().get("error", {})
    except ValueError:
        return response.text[:200], {}
    return str(error.get("message", "")), dict(error.get("details") or {})


def raise_for(response: httpx.Response) -> None:
    """Turn a worker error response into the project's error (or return for a success)."""
    if response.is_success:
        return
    message, details = _error_parts(response)
    code = response.status_code
    if code == 422:
        raise InvalidParamsError(message or "invalid demo parameters", details=details)
    if code == 429:
        retry = int(response.headers.get("Retry-After", RETRY_AFTER_S))
        raise QueueFullError(message or "the demo queue is full", retry_after=retry)
    if code == 404:
        raise NotFoundError(message or "no such demo run")
    if code == 410:
        raise RunLost(message)
    if code in (401, 403):
        raise UnavailableError(
            "the demo worker refused the API's token: set the same TUTOR_WORKER_TOKEN for both", retry_after=30
        )
    raise UnavailableError(f"the demo worker failed ({code}): {message}", retry_after=RETRY_AFTER_S)


class WorkerClient:
    """Calls the worker at settings.worker_url with its token; 503 when it is down or slow."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.worker_url.rstrip("/")
        self.timeout = settings.worker_timeout_s
        token = settings.worker_token or ""
        self.headers = {"Authorization": f"Bearer {token}"}

    def _unavailable(self, exc: httpx.HTTPError) -> UnavailableError:
        if isinstance(exc, httpx.TimeoutException):
            what = f"did not answer within {self.timeout:g}s"
        else:
            what = "is not reachable"
        return UnavailableError(
            f"the demo worker at {self.url} {what}; live demos are unavailable, try again shortly",
            retry_after=RETRY_AFTER_S,
        )

    def request(self, method: str, path: str, json: dict[str, Any] | None = None) -> Any:
        """One call to the worker, its JSON answer or a mapped error."""
        try:
            with httpx.Client(timeout=self.timeout, headers=self.headers) as http:
                response = http.request(method, f"{self.url}{path}", json=json)
        except httpx.HTTPError as exc:
            raise self._unavailable(exc) from exc
        except UnicodeEncodeError as exc:  # a lone surrogate in the parameters: not text the worker could read
            raise InvalidParamsError("the parameters must be valid Unicode text (no lone surrogates)") from exc
        raise_for(response)
        return response.json()

    async def stream(self, run_id: str, after: int) -> AsyncIterator[str]:
        """The worker's event stream for a run, line by line (raises httpx errors mid-stream)."""
        timeout = httpx.Timeout(self.timeout, read=STREAM_READ_TIMEOUT_S)
        async with (
            httpx.AsyncClient(timeout=timeout, headers=self.headers) as http,
            http.stream("GET", f"{self.url}/v1/runs/{run_id}/events", params={"after": after}) as response,
        ):
            if not response.is_success:
                await response.aread()
                raise_for(response)
            async for line in response.aiter_lines():
                yield line
