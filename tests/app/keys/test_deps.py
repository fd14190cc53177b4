"""The key dependencies inside the real app: 401, 403, 429 with Retry-After, 503, usage per request."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from limits.storage import MemoryStorage
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.deps import SessionDep
from app.errors import ConflictError
from app.keys.deps import API_KEY_HEADER, ApiKeyDep, OptionalApiKeyDep, count_usage, require_scope
from app.keys.ratelimit import RateLimiter
from app.keys.service import Caller, revoke, usage
from app.main import create_app
from tests.app.keys.conftest import REDIS_URL, make_key
from tests.fakes import FakeEncoder

Starter = Callable[[RateLimiter | None], TestClient]
AuthorKey = Annotated[Caller, Depends(require_scope("author"))]


def build_app(settings: Settings, encoder: FakeEncoder, limiter: RateLimiter | None) -> FastAPI:
    """The real app (error handlers, runtime, sessions) with test routes behind the key dependencies."""
    app = create_app(settings, lambda _: encoder, load_in_background=False)
    if limiter is not None:
        app.state.rate_limiter = limiter

    @app.post("/test/grade")
    def grade(key: ApiKeyDep, session: SessionDep, items: int = 1) -> dict[str, str]:
        count_usage(session, key, "grade", items)
        return {"key": key.id}

    @app.post("/test/fails")
    def fails(key: ApiKeyDep, session: SessionDep) -> None:
        count_usage(session, key, "grade", 1)
        raise ConflictError("grading failed after counting")

    @app.get("/test/author")
    def author(key: AuthorKey, same: ApiKeyDep) -> dict[str, str]:
        return {"key": key.id, "same": str(key is same)}

    @app.get("/test/optional")
    def optional(key: OptionalApiKeyDep) -> dict[str, str | None]:
        return {"key": key.id if key else None}

    return app


@pytest.fixture
def start(settings: Settings, fake_encoder: FakeEncoder) -> Iterator[Starter]:
    """Start an app on the test's database (a preset limiter, or None to build it from settings)."""
    with ExitStack() as stack:

        def starter(limiter: RateLimiter | None) -> TestClient:
            return stack.enter_context(TestClient(build_app(settings, fake_encoder, limiter)))

        yield starter


def memory(limit: str = "100/minute") -> RateLimiter:
    return RateLimiter(MemoryStorage(), limit, shared=False)


def assert_error(response: Any, status: int, code: str, message: str) -> None:
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code and message in body["error"]["message"]


def test_missing_wrong_and_revoked_keys_get_401(start: Starter, factory: sessionmaker[Session]) -> None:
    client = start(memory())
    key, secret = make_key(factory)
    assert_error(client.post("/test/grade"), 401, "unauthorized", "missing API key")
    assert_error(client.post("/test/grade", headers={API_KEY_HEADER: ""}), 401, "unauthorized", "missing API key")
    wrong = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    assert_error(client.post("/test/grade", headers={API_KEY_HEADER: wrong}), 401, "unauthorized", "unknown API key")
    ok = client.post("/test/grade", headers={API_KEY_HEADER: secret})
    assert ok.status_code == 200 and ok.json() == {"key": key.id}
    callers = client.app.state.runtime.callers  # type: ignore[attr-defined]
    now = [0.0]
    callers.clock = lambda: now[0]
    callers.clear()
    assert client.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 200  # read and trusted now
    with transaction(factory) as session:
        revoke(session, key.id)
    # A key read within the last TUTOR_KEY_CACHE_S seconds is trusted without a query...
    now[0] = callers.ttl_s - 0.01
    assert client.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 200
    # ...and the revocation holds once that has passed.
    now[0] = callers.ttl_s
    assert_error(client.post("/test/grade", headers={API_KEY_HEADER: secret}), 401, "unauthorized", "revoked")


def test_revocation_is_immediate_without_the_key_cache(settings: Settings, fake_encoder: FakeEncoder,
                                                       factory: sessionmaker[Session]) -> None:
    uncached = settings.model_copy(update={"key_cache_s": 0.0})
    with TestClient(build_app(uncached, fake_encoder, memory())) as client:
        key, secret = make_key(factory)
        assert client.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 200
        with transaction(factory) as session:
            revoke(session, key.id)
        assert_error(client.post("/test/grade", headers={API_KEY_HEADER: secret}), 401, "unauthorized", "revoked")


def test_over_the_limit_gets_429_with_retry_after(start: Starter, factory: sessionmaker[Session]) -> None:
    client = start(memory("100/minute"))
    limited, secret = make_key(factory, rate_limit="2/minute")
    _, other = make_key(factory, name="other")
    for _ in range(2):
        assert client.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 200
    refused = client.post("/test/grade", headers={API_KEY_HEADER: secret})
    assert_error(refused, 429, "rate_limited", "2/minute")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert client.post("/test/grade", headers={API_KEY_HEADER: other}).status_code == 200
    with factory() as session:  # refused calls are not counted as usage
        assert [(r.calls, r.items) for r in usage(session, limited.id)] == [(2, 2)]


def test_limit_holds_across_two_app_processes_sharing_redis(
    start: Starter, factory: sessionmaker[Session], redis_prefix: str
) -> None:
    one = start(RateLimiter.for_redis(REDIS_URL, "100/minute", key_prefix=redis_prefix))
    two = start(RateLimiter.for_redis(REDIS_URL, "100/minute", key_prefix=redis_prefix))
    _, secret = make_key(factory, rate_limit="3/minute")
    for client in (one, two, one):
        assert client.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 200
    for client in (two, one):
        refused = client.post("/test/grade", headers={API_KEY_HEADER: secret})
        assert_error(refused, 429, "rate_limited", "3/minute")
        assert int(refused.headers["Retry-After"]) >= 1


def test_in_memory_limits_are_per_process(start: Starter, factory: sessionmaker[Session]) -> None:
    one, two = start(None), start(None)  # no redis_url: each app builds its own memory limiter
    _, secret = make_key(factory, rate_limit="2/minute")
    for client in (one, one, two, two):
        assert client.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 200
    assert two.post("/test/grade", headers={API_KEY_HEADER: secret}).status_code == 429
    limiters = [c.app.state.rate_limiter for c in (one, two)]  # type: ignore[attr-defined]
    assert limiters[0] is not limiters[1] and not limiters[0].shared


def test_unreachable_redis_gets_503_not_500(start: Starter, factory: sessionmaker[Session]) -> None:
    client = start(RateLimiter.for_redis("redis://127.0.0.1:1/0", "5/minute", key_prefix="never-used"))
    _, secret = make_key(factory)
    refused = client.post("/test/grade", headers={API_KEY_HEADER: secret})
    assert_error(refused, 503, "unavailable", "unreachable")
    assert refused.headers["Retry-After"] == "5"


def test_misconfigured_redis_url_gets_503(
    settings: Settings, fake_encoder: FakeEncoder, factory: sessionmaker[Session]
) -> None:
    bad = settings.model_copy(update={"redis_url": "http://127.0.0.1:6379"})
    _, secret = make_key(factory)
    with TestClient(build_app(bad, fake_encoder, None)) as client:
        assert_error(client.post("/test/grade", headers={API_KEY_HEADER: secret}), 503, "unavailable", "misconfigured")


def test_scopes_give_403_and_the_key_is_limited_once_per_request(
    start: Starter, factory: sessionmaker[Session]
) -> None:
    client = start(memory())
    _, grader = make_key(factory, scopes=("grade",))
    author, secret = make_key(factory, name="author", scopes=("grade", "author"), rate_limit="2/minute")
    assert_error(client.get("/test/author", headers={API_KEY_HEADER: grader}), 403, "forbidden", "'author' scope")
    for _ in range(2):  # two dependencies on the key, one hit each request: 2/minute allows two requests
        ok = client.get("/test/author", headers={API_KEY_HEADER: secret})
        assert ok.status_code == 200 and ok.json() == {"key": author.id, "same": "True"}
    assert client.get("/test/author", headers={API_KEY_HEADER: secret}).status_code == 429


def test_optional_key(start: Starter, factory: sessionmaker[Session]) -> None:
    client = start(memory())
    key, secret = make_key(factory)
    assert client.get("/test/optional").json() == {"key": None}
    assert client.get("/test/optional", headers={API_KEY_HEADER: secret}).json() == {"key": key.id}
    assert_error(client.get("/test/optional", headers={API_KEY_HEADER: "gt_nope"}), 401, "unauthorized", "unknown")


def test_usage_is_counted_with_the_request(start: Starter, factory: sessionmaker[Session]) -> None:
    client = start(memory())
    key, secret = make_key(factory)
    assert client.post("/test/grade", params={"items": 3}, headers={API_KEY_HEADER: secret}).status_code == 200
    assert client.post("/test/grade", params={"items": 5}, headers={API_KEY_HEADER: secret}).status_code == 200
    # A request that fails after counting rolls its count back with everything else.
    assert_error(client.post("/test/fails", headers={API_KEY_HEADER: secret}), 409, "conflict", "failed")
    with factory() as session:
        assert [(r.endpoint, r.calls, r.items) for r in usage(session, key.id)] == [("grade", 2, 8)]


def test_openapi_documents_the_key_header(start: Starter) -> None:
    schema = start(memory()).get("/openapi.json").json()
    (scheme,) = schema["components"]["securitySchemes"].values()
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", API_KEY_HEADER)
