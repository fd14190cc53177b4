"""The rate limiter: moving windows in memory and in the shared Redis, and failing closed without Redis."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from limits.storage import MemoryStorage

from app.config import Settings
from app.errors import RateLimitedError, UnavailableError
from app.keys.ratelimit import LocalStorage, RateLimiter, parse_limit
from tests.app.keys.conftest import REDIS_URL


def memory_limiter(default: str = "3/minute") -> RateLimiter:
    return RateLimiter(LocalStorage(), default, shared=False)


def test_the_default_limiter_is_local_and_starts_no_threads() -> None:
    limiter = RateLimiter.from_settings(Settings(redis_url=None, default_rate_limit="1000/minute"))
    assert isinstance(limiter.storage, LocalStorage) and not limiter.shared
    before = threading.active_count()
    for _ in range(50):
        limiter.hit("k_a")
    assert threading.active_count() == before  # the stock MemoryStorage starts a timer thread here
    assert limiter.remaining("k_a") == 950


def test_local_storage_purges_expired_calls_on_a_later_hit() -> None:
    storage = LocalStorage()
    storage.PURGE_EVERY_S = 0.0
    limiter = RateLimiter(storage, "2/second", shared=False)
    limiter.hit("k_a")
    limiter.hit("k_a")
    with pytest.raises(RateLimitedError):
        limiter.hit("k_a")
    time.sleep(1.05)
    limiter.hit("k_a")  # the window has moved on; the two old calls are purged
    assert sum(len(v) for v in storage.events.values()) == 1


def test_the_stock_memory_storage_still_works() -> None:
    limiter = RateLimiter(MemoryStorage(), "1/minute", shared=False)
    limiter.hit("k_a")
    with pytest.raises(RateLimitedError):
        limiter.hit("k_a")


def test_over_the_limit_raises_with_retry_after() -> None:
    limiter = memory_limiter("3/minute")
    for _ in range(3):
        limiter.hit("k_a")
    with pytest.raises(RateLimitedError) as caught:
        limiter.hit("k_a")
    assert caught.value.status == 429
    assert caught.value.retry_after is not None and 1 <= caught.value.retry_after <= 60
    assert "3/minute" in caught.value.message
    limiter.hit("k_b")  # other keys have their own allowance


def test_a_key_limit_overrides_the_default() -> None:
    limiter = memory_limiter("100/minute")
    limiter.hit("k_a", "1/minute")
    with pytest.raises(RateLimitedError):
        limiter.hit("k_a", "1/minute")
    assert limiter.remaining("k_b") == 100


def test_the_window_moves_and_retry_after_is_at_least_one() -> None:
    limiter = memory_limiter("2/second")
    limiter.hit("k_a")
    limiter.hit("k_a")
    with pytest.raises(RateLimitedError) as caught:
        limiter.hit("k_a")
    assert caught.value.retry_after == 1  # under a second left still says 1, never 0
    time.sleep(1.1)
    limiter.hit("k_a")


def test_several_limits_use_the_short_window_first() -> None:
    limiter = memory_limiter()
    assert [str(i) for i in parse_limit("5/minute;1/second")] == ["1 per 1 second", "5 per 1 minute"]
    limiter.hit("k_a", "5/minute;1/second")
    with pytest.raises(RateLimitedError) as caught:
        limiter.hit("k_a", "5/minute;1/second")
    assert caught.value.details["limit"] == "1 per 1 second"
    # The refused call took no slot of the minute window.
    assert limiter.remaining("k_a", "5/minute") == 4


def test_from_settings_picks_memory_without_redis_url() -> None:
    limiter = RateLimiter.from_settings(Settings(redis_url=None, default_rate_limit="7/hour"))
    assert not limiter.shared and isinstance(limiter.storage, MemoryStorage)
    assert limiter.remaining("k_a") == 7


def test_from_settings_refuses_bad_configuration() -> None:
    with pytest.raises(ValueError, match="redis://"):
        RateLimiter.from_settings(Settings(redis_url="http://user:pw@example.org"))
    with pytest.raises(ValueError, match="rate limit"):
        RateLimiter.from_settings(Settings(default_rate_limit="plenty"))


def test_limit_holds_across_two_limiters_sharing_redis(redis_prefix: str) -> None:
    settings = Settings(redis_url=REDIS_URL, default_rate_limit="4/minute")
    first = RateLimiter.from_settings(settings, key_prefix=redis_prefix)
    second = RateLimiter.from_settings(settings, key_prefix=redis_prefix)
    assert first.shared and second.shared and first.storage is not second.storage
    for limiter in (first, second, first, second):
        limiter.hit("k_a")
    for limiter in (first, second):
        with pytest.raises(RateLimitedError) as caught:
            limiter.hit("k_a")
        assert caught.value.retry_after is not None and 1 <= caught.value.retry_after <= 60
    second.hit("k_b")
    keys: list[bytes] = redis.Redis.from_url(REDIS_URL).keys(f"{redis_prefix}:*")  # type: ignore[assignment]
    assert len(keys) == 2 and all(b"k_a" in k or b"k_b" in k for k in keys)


def test_separate_memory_limiters_do_not_share_counts() -> None:
    # The contrast to the Redis test: in-process limits are per process.
    first, second = memory_limiter("2/minute"), memory_limiter("2/minute")
    for limiter in (first, first, second, second):
        limiter.hit("k_a")
    with pytest.raises(RateLimitedError):
        first.hit("k_a")


def test_unreachable_redis_fails_closed_with_503() -> None:
    limiter = RateLimiter.for_redis("redis://127.0.0.1:1/0", "5/minute", key_prefix=f"x-{uuid.uuid4().hex}")
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="unreachable") as caught:
        limiter.hit("k_a")
    assert caught.value.status == 503
    with pytest.raises(UnavailableError):
        limiter.check()
    assert time.monotonic() - started < 10


def test_check_passes_on_a_live_redis(redis_prefix: str) -> None:
    RateLimiter.for_redis(REDIS_URL, "5/minute", key_prefix=redis_prefix).check()
    memory_limiter().check()
