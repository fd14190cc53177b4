"""What the API keeps in memory: the LRU/TTL cache, and bank questions trusted for TUTOR_BANK_CACHE_S."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.answers.cache import BankCache
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from app.models import RETIRED, Question
from app.serving.cache import LRUCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entries_expire_after_the_ttl() -> None:
    clock = Clock()
    cache: LRUCache[str, int] = LRUCache(4, ttl_s=2.0, clock=clock)
    cache.put("a", 1)
    clock.now = 1.99
    assert cache.get("a") == 1
    clock.now = 2.0
    assert cache.get("a") is None and len(cache) == 0


def test_least_recently_used_goes_first_and_ttl_none_keeps() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now b is the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_ttl_zero_disables_the_cache() -> None:
    cache: LRUCache[str, int] = LRUCache(2, ttl_s=0)
    assert cache.put("a", 1) == 1
    assert cache.get("a") is None and len(cache) == 0


def test_a_cache_needs_room() -> None:
    with pytest.raises(ValueError, match="at least one"):
        LRUCache(0)


@pytest.fixture
def secret(client: TestClient) -> str:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        _, value = create_key(s, name="cache")
    engine.dispose()
    return value


def _retire(client: TestClient, question_id: str) -> None:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        s.execute(update(Question).where(Question.id == question_id).values(status=RETIRED))
    engine.dispose()


def _grade(client: TestClient, secret: str, qid: str) -> tuple[int, dict[str, object]]:
    res = client.post("/v1/grade", json={"question_id": qid, "answer": "it splits the work"},
                      headers={"X-API-Key": secret})
    return res.status_code, res.json()


def test_a_bank_question_is_read_once_per_ttl(client: TestClient, secret: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from app.answers import cache as cache_module

    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    clock = Clock()
    runtime.questions = BankCache(ttl_s=2.0, clock=clock)
    reads: list[str] = []
    real: Callable[..., Question] = cache_module.get_question

    def counting(session: object, question_id: str) -> Question:
        reads.append(question_id)
        return real(session, question_id)

    monkeypatch.setattr(cache_module, "get_question", counting)
    qid = client.get("/v1/questions").json()["items"][0]["id"]
    first = [_grade(client, secret, qid) for _ in range(3)]
    assert reads == [qid] and all(code == 200 for code, _ in first)
    clock.now = 2.0
    assert _grade(client, secret, qid)[0] == 200
    assert reads == [qid, qid]


def test_a_retired_question_stops_grading_once_its_entry_expires(client: TestClient, secret: str) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    clock = Clock()
    runtime.questions = BankCache(ttl_s=2.0, clock=clock)
    qid = client.get("/v1/questions").json()["items"][0]["id"]
    assert _grade(client, secret, qid)[0] == 200
    _retire(client, qid)
    clock.now = 1.5
    assert _grade(client, secret, qid)[0] == 200  # trusted for the cache's time
    clock.now = 2.0
    code, body = _grade(client, secret, qid)
    assert code == 404 and body["error"]["code"] == "not_found"  # type: ignore[index]


def test_without_the_bank_cache_a_retired_question_stops_at_once(client: TestClient, secret: str) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    runtime.questions = BankCache(ttl_s=0)
    qid = client.get("/v1/questions").json()["items"][0]["id"]
    assert _grade(client, secret, qid)[0] == 200
    _retire(client, qid)
    assert _grade(client, secret, qid)[0] == 404
