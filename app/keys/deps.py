"""Request dependencies of the public API: the caller's key, its rate limit, scopes and usage, and the
per-address limit of calls without a key."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from app.config import Settings
from app.db import transaction
from app.deps import RuntimeDep
from app.errors import ForbiddenError, UnavailableError
from app.keys.ratelimit import RateLimiter
from app.keys.service import Caller, authenticate, hash_secret, record_usage
from app.serving.runtime import Runtime

API_KEY_HEADER = "X-API-Key"
# auto_error=False: a missing key is answered by our own 401 in the project's error shape;
# the scheme still documents the header in OpenAPI.
api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="a key from `tutor keys create`")
_limiter_lock = threading.Lock()


async def get_rate_limiter(request: Request, runtime: RuntimeDep) -> RateLimiter:
    """The app's limiter, built from the runtime's settings on first use (tests may preset it)."""
    return rate_limiter_of(request.app.state, runtime)


def rate_limiter_of(state: State, runtime: Runtime) -> RateLimiter:
    """The limiter kept in the app's state, made on first use."""
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


async def require_api_key(
    runtime: RuntimeDep,
    limiter: RateLimiterDep,
    secret: Annotated[str | None, Depends(api_key_header)] = None,
) -> Caller:
    """The caller's active key (401 when missing, unknown or revoked), counted against its rate limit (429).

    A key once read is trusted for `TUTOR_KEY_CACHE_S` seconds (`runtime.callers`), so a busy client
    costs no query per call; a key revoked meanwhile stops working when its entry expires.
    """
    caller = await _authenticated(runtime, secret)
    await charge(limiter, caller, 1)
    return caller


async def uncounted_api_key(
    runtime: RuntimeDep, secret: Annotated[str | None, Depends(api_key_header)] = None
) -> Caller:
    """The caller's active key (401 like `require_api_key`), not yet counted: for a route whose cost depends on
    its body, which then counts it with `charge` (POST /v1/grade/batch: one call per item)."""
    return await _authenticated(runtime, secret)


async def charge(limiter: RateLimiter, caller: Caller, cost: int) -> None:
    """Count `cost` calls of `caller` against its rate limit, all or none (429 when they do not fit)."""
    if limiter.shared:  # Redis: a network round trip, kept off the event loop
        await run_in_threadpool(limiter.hit, caller.id, caller.rate_limit, cost)
    else:
        limiter.hit(caller.id, caller.rate_limit, cost)


async def _authenticated(runtime: Runtime, secret: str | None) -> Caller:
    digest = hash_secret(secret) if secret else None
    cached = runtime.callers.get(digest) if digest else None
    if cached is not None:
        return cached

    def lookup() -> Caller:
        with transaction(runtime.factory) as session:
            caller = Caller.of(authenticate(session, secret))
        return runtime.callers.put(digest, caller) if digest else caller

    if digest is None:  # no key sent: 401 from `authenticate`
        return await run_in_threadpool(lookup)
    return await runtime.key_reads.load(digest, lookup)


async def optional_api_key(
    runtime: RuntimeDep,
    limiter: RateLimiterDep,
    secret: Annotated[str | None, Depends(api_key_header)] = None,
) -> Caller | None:
    """The caller's key when one is sent (checked and rate-limited like `require_api_key`), else None."""
    if secret is None:
        return None
    return await require_api_key(runtime, limiter, secret)


ApiKeyDep = Annotated[Caller, Depends(require_api_key)]
OptionalApiKeyDep = Annotated[Caller | None, Depends(optional_api_key)]
UncountedApiKeyDep = Annotated[Caller, Depends(uncounted_api_key)]


def anonymous_limit(scope: str, limit_of: Callable[[Settings], str]) -> Callable[..., Awaitable[Caller | None]]:
    """A dependency limiting a route's calls without an API key per client address (429 when over).

    A call that sends a key is checked and counted like `require_api_key` instead (401 for a wrong one,
    so a made-up key does not escape the limit) and gives the key; an anonymous call gives None. The
    address is the socket's peer as the server reports it (uvicorn puts the X-Forwarded-For client there
    only for a peer in its FORWARDED_ALLOW_IPS); requests without one share the address "unknown".
    Use in a route's `dependencies`, after checks that refuse a request without counting it.
    """

    async def dependency(
        request: Request,
        runtime: RuntimeDep,
        limiter: RateLimiterDep,
        secret: Annotated[str | None, Depends(api_key_header)] = None,
    ) -> Caller | None:
        if secret is not None:
            return await require_api_key(runtime, limiter, secret)
        address = request.client.host if request.client else "unknown"
        limit = limit_of(runtime.settings)
        if limiter.shared:
            await run_in_threadpool(limiter.hit_anonymous, scope, address, limit)
        else:
            limiter.hit_anonymous(scope, address, limit)
        return None

    dependency.__name__ = f"limit_anonymous_{scope}"
    return dependency


# POST /v1/ask, and the chat's messages and new conversations (one allowance for the chat).
ASK_LIMIT = Depends(anonymous_limit("ask", lambda settings: settings.anonymous_ask_rate_limit))
CHAT_LIMIT = Depends(anonymous_limit("chat", lambda settings: settings.anonymous_chat_rate_limit))


def require_scope(scope: str) -> Callable[[Caller], Awaitable[Caller]]:
    """A dependency giving the caller's key when it has `scope`, 403 otherwise.

    Use as `key: Annotated[Caller, Depends(require_scope("author"))]`; it shares the request's
    `require_api_key`, so the call is authenticated and rate-limited once however many are used.
    """

    async def dependency(key: ApiKeyDep) -> Caller:
        if scope not in key.scopes:
            raise ForbiddenError(
                f"API key {key.id} lacks the {scope!r} scope",
                details={"key_id": key.id, "required": scope, "scopes": key.scopes},
            )
        return key

    dependency.__name__ = f"require_scope_{scope}"
    return dependency


def count_usage(session: Session, key: Caller, endpoint: str, items: int = 1) -> None:
    """Count one call to `endpoint` with `items` graded items for `key`, in the request's transaction."""
    record_usage(session, key.id, endpoint, items)
