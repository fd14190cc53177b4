"""Fixtures of the key tests: the local Redis under a private prefix, key helpers (`factory`, a migrated
database, is in tests/app/conftest.py: the `tutor keys` tests in tests/app/cli use it too)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.keys.ratelimit import RateLimiter
from app.keys.service import create_key
from app.models import ApiKey

REDIS_URL = os.environ.get("TUTOR_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(scope="session")
def redis_available() -> bool:
    """Whether the local Redis answers; it must unless TUTOR_SKIP_REDIS=1."""
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        if os.environ.get("TUTOR_SKIP_REDIS") == "1":
            return False
        raise


@pytest.fixture
def redis_prefix(redis_available: bool) -> Iterator[str]:
    """A key prefix of this test alone in the shared Redis; its keys (and only those) go at the end."""
    if not redis_available:
        pytest.skip("TUTOR_SKIP_REDIS=1 and no Redis")
    prefix = f"tutor-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    RateLimiter.for_redis(REDIS_URL, "1/second", key_prefix=prefix).reset()
    assert not redis.Redis.from_url(REDIS_URL).keys(f"{prefix}:*")


def make_key(
    factory: sessionmaker[Session],
    *,
    name: str = "test client",
    scopes: tuple[str, ...] = ("grade",),
    rate_limit: str | None = None,
) -> tuple[ApiKey, str]:
    """Create a key in its own transaction; returns the row and its secret."""
    with transaction(factory) as session:
        return create_key(session, name=name, scopes=scopes, rate_limit=rate_limit)
