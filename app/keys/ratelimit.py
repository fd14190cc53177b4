"""Rate limits per API key, and per client address for calls without a key, with the `limits` library:
Redis when configured, process memory otherwise."""

from __future__ import annotations

import math
import threading
import time
from functools import lru_cache
from typing import cast
from urllib.parse import urlsplit

import limits
from limits.errors import ConfigurationError, StorageError
from limits.storage import MemoryStorage, Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from app.config import Settings
from app.errors import RateLimitedError, UnavailableError

REDIS_SCHEMES = ("redis", "rediss", "redis+unix", "redis+sentinel", "redis+cluster", "valkey", "valkeys")
DEFAULT_KEY_PREFIX = "tutor"
# A hung Redis must not hang every request: fail fast, then answer 503.
REDIS_TIMEOUT_S = 1.0


@lru_cache(maxsize=256)
def parse_limit(limit: str) -> tuple[limits.RateLimitItem, ...]:
    """The limits of a string like "60/minute" or "10/second;500/hour", shortest window first."""
    # Shortest first: a request refused by a short window then uses no slot of the longer ones.
    return tuple(sorted(limits.parse_many(limit), key=lambda item: item.get_expiry()))


class RateLimiter:
    """Moving-window limits per API key (and per client address for anonymous calls, `hit_anonymous`) over a
    shared (Redis) or process-local (memory) storage.

    Moving window rather than fixed window: a fixed window lets a client spend its whole
    allowance at the end of one window and again at the start of the next (twice the limit in
    a moment), which is the burst the limit exists to stop on a CPU-bound grader. The moving
    window counts the last N seconds exactly; its cost is one timestamp per allowed call (a
    Redis list trimmed to the limit), which is small at per-key limits like 120/minute. It also
    gives an exact Retry-After: the moment the oldest call in the window leaves it. Refused
    calls are not recorded, so a client that keeps retrying is let in as soon as a slot frees.

    Fails closed: when the storage (Redis) cannot be reached, `hit` raises UnavailableError
    (503 with Retry-After) instead of letting the call through. Failing open would remove the
    only protection of the shared grader exactly while the infrastructure is degraded, and
    falling back to per-process memory would silently multiply every limit by the number of
    API processes. Without TUTOR_REDIS_URL the limits are per process, which is right for the
    embedded single-process default.
    """

    def __init__(self, storage: Storage, default_limit: str, *, shared: bool) -> None:
        parse_limit(default_limit)  # refuse a bad default now, not on the first request
        self.storage = storage
        self.default_limit = default_limit
        self.shared = shared
        self._strategy = MovingWindowRateLimiter(storage)

    @classmethod
    def from_settings(cls, settings: Settings, *, key_prefix: str = DEFAULT_KEY_PREFIX) -> RateLimiter:
        """Redis storage when `settings.redis_url` is set (limits hold across processes), memory otherwise."""
        if not settings.redis_url:
            return cls(LocalStorage(), settings.default_rate_limit, shared=False)
        return cls.for_redis(settings.redis_url, settings.default_rate_limit, key_prefix=key_prefix)

    @classmethod
    def for_redis(cls, url: str, default_limit: str, *, key_prefix: str = DEFAULT_KEY_PREFIX) -> RateLimiter:
        """A limiter on the Redis at `url`; its counters live under `key_prefix:` (nothing is contacted yet)."""
        if urlsplit(url).scheme not in REDIS_SCHEMES:
            raise ValueError(f"TUTOR_REDIS_URL must be a redis:// URL, got {_redact(url)!r}")
        try:
            storage = cast(
                Storage,
                storage_from_string(
                    url,
                    key_prefix=key_prefix,
                    wrap_exceptions=True,
                    socket_connect_timeout=REDIS_TIMEOUT_S,
                    socket_timeout=REDIS_TIMEOUT_S,
                ),
            )
        except ConfigurationError as exc:
            raise ValueError(f"cannot use {_redact(url)!r} for rate limits: {exc}") from exc
        return cls(storage, default_limit, shared=True)

    def hit(self, key_id: str, limit: str | None = None, cost: int = 1) -> None:
        """Count `cost` calls of `key_id` against `limit` (or the default); RateLimitedError when over it.

        All or none: a call that does not fit whole (a batch of `cost` items when fewer calls are left)
        takes nothing, so a client is never charged for what it was refused.
        """
        limit = limit or self.default_limit
        refused = self._take((key_id,), parse_limit(limit), cost)
        if refused is None:
            return
        item, remaining, retry_after = refused
        details: dict[str, object] = {"key_id": key_id, "limit": str(item)}
        if cost == 1:
            message = f"rate limit of {limit} exceeded for key {key_id}"
        elif cost > item.amount:
            message = (f"a batch of {cost} items is over the rate limit of {limit} for key {key_id}: "
                       f"send at most {item.amount} items per call")
            details |= {"cost": cost, "remaining": remaining}
        else:
            message = (f"rate limit of {limit} exceeded for key {key_id}: a batch of {cost} items costs {cost} "
                       f"calls and {remaining} are left; nothing was graded")
            details |= {"cost": cost, "remaining": remaining}
        raise RateLimitedError(message, details=details, retry_after=retry_after)

    def hit_anonymous(self, scope: str, address: str, limit: str) -> None:
        """Count one call without an API key from the client at `address` against `scope`'s `limit`.

        Each scope ("ask", "chat") counts apart, under its own storage keys, so one cannot spend the other's
        allowance, and neither shares a counter with any API key. A limit that does not parse is the
        operator's error: UnavailableError (503), not a 500 on every call.
        """
        try:
            items = parse_limit(limit)
        except ValueError as exc:
            raise UnavailableError(f"rate limiting is misconfigured: {exc}") from exc
        refused = self._take(("anonymous", scope, address), items, 1)
        if refused is None:
            return
        item, _, retry_after = refused
        raise RateLimitedError(
            f"rate limit of {limit} for anonymous {scope} calls exceeded from {address}; retry in {retry_after} s",
            details={"client": address, "scope": scope, "limit": str(item)},
            retry_after=retry_after,
        )

    def _take(
        self, identifiers: tuple[str, ...], items: tuple[limits.RateLimitItem, ...], cost: int
    ) -> tuple[limits.RateLimitItem, int, int] | None:
        """Take `cost` slots of every window; None when taken, else (the window refusing, slots left, Retry-After).

        One window (the usual limit) takes or refuses in one atomic step. With several, a multi-slot call
        is first tested against each, so that one refused by a longer window takes no slots of the shorter
        ones (between the test and the take another call may still slip in: the take refuses it then).
        """
        try:
            if cost > 1 and len(items) > 1:
                for item in items:
                    if not self._strategy.test(item, *identifiers, cost=cost):
                        return self._refused(item, identifiers)
            for item in items:
                if not self._strategy.hit(item, *identifiers, cost=cost):
                    return self._refused(item, identifiers)
        except StorageError as exc:
            raise self._unavailable(exc) from exc
        return None

    def _refused(
        self, item: limits.RateLimitItem, identifiers: tuple[str, ...]
    ) -> tuple[limits.RateLimitItem, int, int]:
        """The refusing window, the slots left in it and the seconds until its oldest call leaves it.

        For a call of several slots that is when the first slot frees, a lower bound: more may be needed.
        """
        stats = self._strategy.get_window_stats(item, *identifiers)
        return item, stats.remaining, max(1, math.ceil(stats.reset_time - time.time()))

    def remaining(self, key_id: str, limit: str | None = None) -> int:
        """Calls left to `key_id` now under the tightest of its limits."""
        try:
            items = parse_limit(limit or self.default_limit)
            return min(self._strategy.get_window_stats(item, key_id).remaining for item in items)
        except StorageError as exc:
            raise self._unavailable(exc) from exc

    def check(self) -> None:
        """Raise UnavailableError when the storage does not answer (for readiness checks)."""
        try:
            healthy = self.storage.check()
        except StorageError as exc:
            raise self._unavailable(exc) from exc
        if not healthy:
            raise UnavailableError("rate-limit storage (Redis) is unreachable")

    def reset(self) -> None:
        """Drop every counter of this limiter (only keys under its own prefix in Redis)."""
        self.storage.reset()

    def _unavailable(self, exc: StorageError) -> UnavailableError:
        cause = type(exc.storage_error).__name__
        return UnavailableError(
            f"rate-limit storage (Redis) is unreachable ({cause}); try again shortly",
            details={"storage": "redis", "error": cause},
        )


class LocalStorage(MemoryStorage):
    """`limits`' in-process storage, purging expired calls at most once a second on a caller's thread.

    The stock storage starts a new timer thread 10 ms after any hit whose timer has finished, so a
    busy API starts about a hundred threads a second (measured: 7 % of the event loop's time at 32
    clients). The moving window does not need the purge to be correct (each hit compares
    timestamps); the purge only bounds memory, which once a second does as well.
    """

    PURGE_EVERY_S = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._purged_at = time.monotonic()
        self._purge_lock = threading.Lock()

    def _MemoryStorage__schedule_expiry(self) -> None:  # replaces the private timer-thread scheduler
        now = time.monotonic()
        if now - self._purged_at >= self.PURGE_EVERY_S and self._purge_lock.acquire(blocking=False):
            try:
                self._purged_at = now
                self._MemoryStorage__expire_events()  # type: ignore[attr-defined]
            finally:
                self._purge_lock.release()


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url
