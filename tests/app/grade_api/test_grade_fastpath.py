"""POST /v1/grade's hot path (app/grade_api/fastpath.py) answers exactly what the FastAPI route does.

The hot path takes `application/json` bodies; the route is reached with a `+json` media type
(FastAPI parses it as JSON, the hot path passes it on), so every case is asked both ways and the
answers compared.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.requests import ClientDisconnect

import app.grade_api.fastpath as fastpath
from tests.app.grade_api.test_grade_api import INLINE, _count


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls that the hot path answered itself."""
    calls: list[int] = []
    inner = fastpath.grade_one_response

    async def counting(*args: Any) -> Any:
        calls.append(1)
        return await inner(*args)

    monkeypatch.setattr(fastpath, "grade_one_response", counting)
    return calls


def _post(client: TestClient, body: Any, secret: str | None, *, route: bool) -> Any:
    headers = {"X-API-Key": secret} if secret else {}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers["Content-Type"] = "application/vnd.test+json" if route else "application/json"
    return client.post("/v1/grade", content=raw, headers=headers)


def _answer(res: Any) -> tuple[int, Any, str | None]:
    data = res.json()
    if isinstance(data, dict):
        data.pop("attempt_id", None)
    return res.status_code, data, res.headers.get("retry-after")


def test_a_graded_answer_is_served_by_the_hot_path_and_stored(
    client: TestClient, make_key: Callable[..., tuple[str, str]], taken: list[int]
) -> None:
    key_id, secret = make_key()
    qid = client.get("/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]
    res = _post(client, {"question_id": qid, "answer": "each rank keeps one reduced shard"}, secret, route=False)
    assert res.status_code == 200, res.text
    assert taken == [1]
    assert res.json()["question_id"] == qid and res.json()["attempt_id"]
    assert _count(client, api_key_id=key_id, question_id=qid) == 1


def test_the_hot_path_and_the_route_answer_alike(
    client: TestClient, make_key: Callable[..., tuple[str, str]], taken: list[int]
) -> None:
    _, secret = make_key()
    qid = client.get("/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]
    rubric = client.post("/v1/rubrics", json=INLINE, headers={"X-API-Key": make_key(scopes=("grade",))[1]})
    assert rubric.status_code == 201, rubric.text
    cases: list[tuple[Any, str | None]] = [
        ({"question_id": qid, "answer": "each rank keeps one reduced shard"}, secret),  # bank question
        ({"question_id": qid, "answer": "the fans spin faster"}, secret),
        ({**INLINE, "answer": "everyone gets every chunk"}, secret),  # inline question
        ({"question_id": "q_unknown", "answer": "x"}, secret),  # 404
        ({"rubric_id": rubric.json()["rubric_id"], "answer": "x"}, secret),  # another key's rubric: 404
        ({"question_id": qid, "answer": "x"}, None),  # no key: 401
        ({"question_id": qid, "answer": "x"}, "gt_not-a-real-key"),  # 401
        ({"question_id": qid, "answer": ""}, secret),  # 422, passed on to the route
        ({"question_id": qid, "answer": "x", "unexpected": 1}, secret),
        ({"answer": "x"}, secret),
        (b'{"question_id": "', secret),  # not JSON
        (b"[]", secret),
    ]
    for body, key in cases:
        hot, route = _post(client, body, key, route=False), _post(client, body, key, route=True)
        assert _answer(hot) == _answer(route), body
        assert hot.headers["content-type"] == route.headers["content-type"]
    assert len(taken) == 5  # the well-formed calls with a known key; the route took the rest


def test_rate_limit_counts_each_call_once(
    client: TestClient, make_key: Callable[..., tuple[str, str]], taken: list[int]
) -> None:
    _, secret = make_key(rate_limit="3/minute")
    body = {**INLINE, "answer": "everyone gets every chunk"}
    codes = [_post(client, body, secret, route=False).status_code for _ in range(2)]
    codes.append(_post(client, {"answer": ""}, secret, route=False).status_code)  # invalid: the route counts it
    limited = _post(client, body, secret, route=False)
    assert codes == [200, 200, 422] and limited.status_code == 429
    assert _answer(limited)[1]["error"]["code"] == "rate_limited" and int(limited.headers["Retry-After"]) >= 1


def test_browsers_get_cors_headers_from_the_hot_path(client: TestClient, make_key: Callable[..., tuple[str, str]],
                                                     taken: list[int]) -> None:
    _, secret = make_key()
    origin = client.app.state.runtime.settings.cors_origins[0]  # type: ignore[attr-defined]
    res = client.post("/v1/grade", json={**INLINE, "answer": "everyone gets every chunk"},
                      headers={"X-API-Key": secret, "Origin": origin})
    assert res.status_code == 200 and taken == [1]
    assert res.headers["access-control-allow-origin"] == origin


def test_an_unexpected_error_is_a_500_in_the_error_shape(
    client: TestClient, make_key: Callable[..., tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = make_key()

    async def broken(*_: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(fastpath, "grade_one_response", broken)
    with TestClient(client.app, raise_server_exceptions=False) as c:
        res = c.post("/v1/grade", json={**INLINE, "answer": "x"}, headers={"X-API-Key": secret})
    assert res.status_code == 500


def test_a_repeated_key_header_is_read_as_the_route_reads_it(
    client: TestClient, make_key: Callable[..., tuple[str, str]], taken: list[int]
) -> None:
    _, secret = make_key()
    raw = json.dumps({**INLINE, "answer": "everyone gets every chunk"}).encode()
    for keys in ([secret, "gt_not-a-real-key"], ["gt_not-a-real-key", secret]):
        codes = []
        for content_type in ("application/json", "application/vnd.test+json"):
            headers = [("X-API-Key", k) for k in keys] + [("Content-Type", content_type)]
            codes.append(client.post("/v1/grade", content=raw, headers=headers).status_code)
        assert codes[0] == codes[1] and codes[0] in (200, 401), keys


def test_the_body_is_read_whole_from_several_messages_and_a_disconnect_stops_it() -> None:
    def receiving(*messages: dict[str, Any]) -> Any:
        queue = list(messages)

        async def receive() -> dict[str, Any]:
            return queue.pop(0)

        return receive

    chunks = receiving({"type": "http.request", "body": b'{"answer":', "more_body": True},
                       {"type": "http.request", "body": b'"x"}', "more_body": False})
    assert asyncio.run(fastpath._body(chunks)) == b'{"answer":"x"}'
    assert asyncio.run(fastpath._body(receiving({"type": "http.request"}))) == b""
    gone = receiving({"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"})
    with pytest.raises(ClientDisconnect):
        asyncio.run(fastpath._body(gone))


def test_headers_are_read_as_the_route_reads_them() -> None:
    scope = {"headers": [(b"x-api-key", b""), (b"content-type", b"Application/JSON; charset=utf-8"),
                         (b"x-api-key", b"gt_second"), (b"content-type", b"text/plain")]}
    assert fastpath._headers(scope) == ("Application/JSON; charset=utf-8", "")  # the first of each
    assert fastpath._headers({"headers": []}) == ("", None)
