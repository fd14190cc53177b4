"""Request dependencies of the public API: the caller's key, its rate limit, scopes and usage."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader
from sqlalchemy.orm import Session

from app.deps import RuntimeDep, SessionDep
from app.errors import ForbiddenError, UnavailableError
from app.keys.ratelimit import RateLimiter
from app.keys.service import authenticate, record_usage
from app.models import ApiKey

API_KEY_HEADER = "X-API-Key"
# auto_error=False: a missing key is answered by our own 401 in the project's error shape;
# the scheme still documents the header in OpenAPI.
api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="a key from `tutor keys create`")
_limiter_lock = threading.Lock()


async def get_rate_limiter(request: Request, runtime: RuntimeDep) -> RateLimiter:
    """The app's limiter, built from the runtime's settings on first use (tests may preset it)."""
    state = request.app.state
    limiter: RateLimiter | None = getattr(state, "rate_limiter", None)
    if limiter is None:
        with _limiter_lock:
            limiter = getattr(state, "rate_limiter", None)
            if limiter is None:
                try:
                    limiter = RateLimiter.from_settings(runtime.settings)
                except ValueError as exc:
                    raise UnavailableError(f"rate limiting is misconfigured: {exc}") from exc
                state.rate_limiter = limiter
    return limiter


RateLimiterDep = Annotated[RateLimiter, Depends(get_rate_limiter)]


def require_api_key(
    session: SessionDep,
    limiter: RateLimiterDep,
    secret: Annotated[str | None, Depends(api_key_header)] = None,
) -> ApiKey:
    """The caller's active key (401 when missing, unknown or revoked), counted against its rate limit (429)."""
    key = authenticate(session, secret)
    limiter.hit(key.id, key.rate_limit)
    return key


def optional_api_key(
    session: SessionDep,
    limiter: RateLimiterDep,
    secret: Annotated[str | None, Depends(api_key_header)] = None,
) -> ApiKey | None:
    """The caller's key when one is sent (checked and rate-limited like `require_api_key`), else None."""
    if secret is None:
        return None
    return require_api_key(session, limiter, secret)


ApiKeyDep = Annotated[ApiKey, Depends(require_api_key)]
OptionalApiKeyDep = Annotated[ApiKey | None, Depends(optional_api_key)]


def require_scope(scope: str) -> Callable[[ApiKey], ApiKey]:
    """A dependency giving the caller's key when it has `scope`, 403 otherwise.

    Use as `key: Annotated[ApiKey, Depends(require_scope("author"))]`; it shares the request's
    `require_api_key`, so the call is authenticated and rate-limited once however many are used.
    """

    def dependency(key: ApiKeyDep) -> ApiKey:
        if scope not in key.scopes:
            raise ForbiddenError(
                f"API key {key.id} lacks the {scope!r} scope",
                details={"key_id": key.id, "required": scope, "scopes": key.scopes},
            )
        return key

    dependency.__name__ = f"require_scope_{scope}"
    return dependency


def count_usage(session: Session, key: ApiKey, endpoint: str, items: int = 1) -> None:
    """Count one call to `endpoint` with `items` graded items for `key`, in the request's transaction."""
    record_usage(session, key.id, endpoint, items)
