"""Security headers on every response, CORS refusals in the error shape, batches counted per item, and
per-address limits on anonymous ask and chat calls.

Before: no X-Content-Type-Options, Referrer-Policy or X-Frame-Options anywhere; a refused CORS preflight
answered a plain-text "Disallowed CORS origin"; a 100-item batch cost one call of the key's limit; and
/v1/ask and the chat answered any number of calls without a key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.ratelimit import RateLimiter
from app.keys.service import create_key
from app.main import create_app
from app.serving.admission import ConcurrencyLimit
from app.web.endpoints import PAGE_CSP
from tests.app.keys.conftest import REDIS_URL, redis_available, redis_prefix  # noqa: F401 (fixtures)
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder

ALLOWED_ORIGIN = "http://127.0.0.1:8000"
INLINE = {
    "question": "What does all-gather do?",
    "reference_answers": ["Every rank ends with the concatenation of all ranks' chunks"],
    "wrong_answers": ["It sums the tensors and sends the sum to every rank"],
}
Starter = Callable[..., TestClient]


class ClientAddress:
    """The app behind a client address taken from the test's `x-test-client` header (as a server gives it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            address = dict(scope["headers"]).get(b"x-test-client")
            if address is not None:
                scope = {**scope, "client": (address.decode(), 50000)}
        await self.app(scope, receive, send)


@pytest.fixture
def start(settings: Settings, fake_encoder: FakeEncoder) -> Iterator[Starter]:
    """Start the real app on a freshly ingested bank, with settings changed as the test asks."""
    ingest_with(settings, fake_encoder)
    clients: list[TestClient] = []

    def starter(limiter: RateLimiter | None = None, **changes: Any) -> TestClient:
        app = create_app(settings.model_copy(update=changes), lambda _: fake_encoder, load_in_background=False)
        if limiter is not None:
            app.state.rate_limiter = limiter

        @app.get("/test/boom", include_in_schema=False)
        def boom() -> None:
            raise RuntimeError("an unexpected failure")

        client = TestClient(ClientAddress(app), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield starter
    for client in clients:
        client.__exit__(None, None, None)


def app_of(client: TestClient) -> FastAPI:
    app = client.app.app  # type: ignore[attr-defined]
    assert isinstance(app, FastAPI)
    return app


def new_key(client: TestClient, rate_limit: str | None = None) -> str:
    engine = make_engine(app_of(client).state.runtime.settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        _, secret = create_key(s, name="test", scopes=("grade",), rate_limit=rate_limit)
    engine.dispose()
    return secret


def assert_error(response: Any, status: int, code: str, message: str = "") -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code and message in body["error"]["message"], body
    return dict(body["error"])


def assert_secure(response: Any) -> None:
    """The headers every response carries; JSON also says it may not be framed nor run anything."""
    headers = response.headers
    where = f"{response.request.method} {response.request.url.path} -> {response.status_code}"
    assert headers.get("x-content-type-options") == "nosniff", where
    assert headers.get("referrer-policy") == "no-referrer", where
    assert headers.get("x-frame-options") == "DENY", where
    if headers.get("content-type", "").startswith("application/json"):
        assert headers.get("content-security-policy") == "default-src 'none'; frame-ancestors 'none'", where
    assert len(headers.get_list("x-content-type-options")) == 1, where


# 1. Security headers.


def test_every_kind_of_response_carries_the_security_headers(start: Starter) -> None:
    client = start()
    secret = new_key(client)
    responses = [
        client.get("/healthz"),
        client.get("/openapi.json"),
        client.get("/widget.js"),
        client.post("/v1/ask", json={"text": "what does all-reduce do?"}),
        client.get("/nowhere"),  # 404
        client.get("/v1/ask"),  # 405
        client.post("/v1/ask", json={"text": ""}),  # 422
        client.post("/v1/grade", json={**INLINE, "answer": "x"}),  # 401 (the hot path's own answer)
        client.post("/v1/grade", json={**INLINE, "answer": "all chunks"}, headers={"X-API-Key": secret}),
        client.post("/v1/ask", content=b"x" * 70_000, headers={"content-type": "application/json"}),  # 413
        client.get("/test/boom"),  # 500 from the server-error layer
        client.options("/v1/ask", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}),
        client.options("/v1/ask", headers={"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST"}),
    ]
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 404, 405, 422, 401, 200, 413, 500, 400, 200]
    for response in responses:
        assert_secure(response)


def test_the_study_page_keeps_its_own_policy(start: Starter) -> None:
    page = start().get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert_secure(page)
    assert page.headers.get_list("content-security-policy") == [PAGE_CSP]


def test_an_admission_refusal_carries_the_security_headers(start: Starter) -> None:
    client = start()
    layer: Any = app_of(client).middleware_stack
    while not isinstance(layer, ConcurrencyLimit):
        layer = layer.app
    layer.queue = 0
    layer._slots = asyncio.Semaphore(0)  # every slot taken: the next request is refused at once
    refused = client.get("/v1/questions")
    assert_error(refused, 503, "overloaded")
    assert_secure(refused)


# 2. CORS preflight refusals.


@pytest.mark.parametrize(
    ("headers", "refused", "named"),
    [
        ({"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, ["origin"],
         "'https://evil.example'"),
        ({"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "DELETE"}, ["method"], "'DELETE'"),
        ({"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST",
          "Access-Control-Request-Headers": "x-secret"}, ["headers"], "x-secret"),
        ({"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"}, ["origin", "method"],
         "'https://evil.example'"),
    ],
)
def test_a_refused_preflight_answers_in_the_error_shape(
    start: Starter, headers: dict[str, str], refused: list[str], named: str
) -> None:
    response = start().options("/v1/chat", headers=headers)
    error = assert_error(response, 400, "cors_refused", named)
    assert error["details"]["refused"] == refused
    assert "access-control-allow-origin" not in response.headers or refused != ["origin"]


def test_allowed_preflights_and_simple_requests_are_unchanged(start: Starter) -> None:
    client = start()
    preflight = client.options(
        "/v1/ask",
        headers={"Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, authorization"},
    )
    assert preflight.status_code == 200 and preflight.text == "OK"
    assert preflight.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert preflight.headers["access-control-allow-methods"] == "GET, POST"
    assert preflight.headers["access-control-max-age"] == "600"
    simple = client.get("/healthz", headers={"Origin": ALLOWED_ORIGIN})
    assert simple.status_code == 200 and simple.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    foreign = client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 200 and "access-control-allow-origin" not in foreign.headers


# 3. A batch costs one call per item.


def _batch(n: int, tag: str) -> dict[str, Any]:
    return {"items": [{**INLINE, "answer": f"every rank gets all chunks {tag} {i}"} for i in range(n)]}


def test_a_batch_costs_one_call_per_item_and_is_refused_whole(start: Starter) -> None:
    client = start()
    secret = new_key(client, rate_limit="5/minute")
    headers = {"X-API-Key": secret}
    assert client.post("/v1/grade/batch", json=_batch(3, "a"), headers=headers).status_code == 200
    over = client.post("/v1/grade/batch", json=_batch(3, "b"), headers=headers)  # 2 calls left, 3 asked
    error = assert_error(over, 429, "rate_limited", "3 items")
    assert error["details"]["cost"] == 3 and error["details"]["remaining"] == 2
    assert int(over.headers["Retry-After"]) >= 1
    assert_secure(over)
    # The refused batch took nothing: the two calls left are still there, then none.
    assert client.post("/v1/grade/batch", json=_batch(2, "c"), headers=headers).status_code == 200
    single = client.post("/v1/grade", json={**INLINE, "answer": "all chunks"}, headers=headers)
    assert_error(single, 429, "rate_limited")


def test_a_batch_larger_than_the_whole_limit_says_so(start: Starter) -> None:
    client = start()
    secret = new_key(client, rate_limit="4/minute")
    over = client.post("/v1/grade/batch", json=_batch(5, "a"), headers={"X-API-Key": secret})
    assert_error(over, 429, "rate_limited", "at most 4")
    assert int(over.headers["Retry-After"]) >= 1
    assert client.post("/v1/grade/batch", json=_batch(4, "b"), headers={"X-API-Key": secret}).status_code == 200


# 4. Anonymous ask and chat calls are limited per client address.


def _ask(client: TestClient, address: str = "10.0.0.1", **headers: str) -> Any:
    return client.post("/v1/ask", json={"text": "what does all-reduce do?"},
                       headers={"x-test-client": address, **headers})


def test_anonymous_ask_is_limited_per_address(start: Starter) -> None:
    client = start(anonymous_ask_rate_limit="3/minute")
    assert [_ask(client).status_code for _ in range(3)] == [200, 200, 200]
    refused = _ask(client)
    assert_error(refused, 429, "rate_limited", "anonymous")
    assert int(refused.headers["Retry-After"]) >= 1
    assert_secure(refused)
    assert _ask(client, "10.0.0.2").status_code == 200  # another address has its own allowance
    # A call with a key counts against the key, not the address; a wrong key is refused, not let through.
    secret = new_key(client, rate_limit="1/minute")
    assert _ask(client, **{"X-API-Key": secret}).status_code == 200
    assert_error(_ask(client, **{"X-API-Key": secret}), 429, "rate_limited", "for key")
    assert_error(_ask(client, **{"X-API-Key": "gt_wrong"}), 401, "unauthorized")


def test_anonymous_chat_is_limited_per_address(start: Starter) -> None:
    client = start(anonymous_chat_rate_limit="3/minute")
    at = {"x-test-client": "10.0.0.1"}
    started = client.post("/v1/chat/conversations", headers=at)
    assert started.status_code == 201, started.text
    token = started.json()["token"]
    turn = {"message": "what does all-reduce do?", "conversation_id": started.json()["id"]}
    assert client.post("/v1/chat", json=turn, headers={**at, "Authorization": f"Bearer {token}"}).status_code == 200
    stream = client.post("/v1/chat/stream", json=turn, headers={**at, "Authorization": f"Bearer {token}"})
    assert stream.status_code == 200
    for path, body in [("/v1/chat", turn), ("/v1/chat/stream", turn), ("/v1/chat/conversations", None)]:
        refused = client.post(path, json=body, headers={**at, "Authorization": f"Bearer {token}"})
        assert_error(refused, 429, "rate_limited", "anonymous")
        assert int(refused.headers["Retry-After"]) >= 1
    # Reading history is not limited; another address chats on.
    listed = client.get("/v1/chat/conversations", headers={**at, "Authorization": f"Bearer {token}"})
    assert listed.status_code == 200
    assert client.post("/v1/chat", json={"message": "hi"}, headers={"x-test-client": "10.0.0.2"}).status_code == 200


def test_anonymous_limits_have_defaults() -> None:
    settings = Settings()
    assert settings.anonymous_ask_rate_limit == "60/minute"
    assert settings.anonymous_chat_rate_limit == "30/minute"


def test_anonymous_limits_are_shared_through_redis(start: Starter, redis_prefix: str) -> None:  # noqa: F811
    def process() -> TestClient:
        return start(RateLimiter.for_redis(REDIS_URL, "120/minute", key_prefix=redis_prefix),
                     anonymous_ask_rate_limit="2/minute")

    first, second = process(), process()  # two API processes on one Redis
    assert _ask(first).status_code == 200 and _ask(second).status_code == 200
    assert_error(_ask(first), 429, "rate_limited")
    assert_error(_ask(second), 429, "rate_limited")
    assert redis.Redis.from_url(REDIS_URL).keys(f"{redis_prefix}:*")


def test_a_bad_anonymous_limit_is_a_503_not_a_500(start: Starter) -> None:
    client = start(anonymous_ask_rate_limit="lots")
    assert_error(_ask(client), 503, "unavailable", "misconfigured")


def test_the_openapi_document_builds(settings: Settings) -> None:
    spec = create_app(settings).openapi()
    assert "/v1/ask" in spec["paths"] and "/v1/grade/batch" in spec["paths"]
