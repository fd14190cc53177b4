"""The bank endpoints and health checks, on both databases, with the fake encoder."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.grading import roles
from app.main import create_app
from app.models import Question
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


def test_health_and_ready(client: TestClient, fake_encoder: FakeEncoder) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["model"] == fake_encoder.model_id


def test_questions_as_learners_see_them(client: TestClient) -> None:
    page = client.get("/v1/questions", params={"limit": 200}).json()
    assert page["total"] == 42 and len(page["items"]) == 42
    for item in page["items"]:
        assert set(item) == {"id", "question", "topics", "concept_id", "source", "options"}
        assert set(item["source"]) == {"file", "number", "lines"}
    with_options = [i for i in page["items"] if i["options"]]
    assert len(with_options) == 32  # files 000 and 003
    assert all(len(i["options"]) == 4 for i in with_options)
    body = str(page)
    assert "(Correct answer)" not in body
    assert "Splitting a mini-batch into micro-batches" not in body  # an explanation
    assert "accepted" not in body and "explanation" not in body


def test_options_are_shuffled_but_stable(client: TestClient, settings: Settings) -> None:
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as session:
        accepted = {q.id: q.accepted_answers[0] for q in session.scalars(select(Question))}
    engine.dispose()
    items = [i for i in client.get("/v1/questions?limit=200").json()["items"] if i["options"]]
    again = [i for i in client.get("/v1/questions?limit=200").json()["items"] if i["options"]]
    assert items == again
    keys = []
    for item in items:
        (key,) = [o["key"] for o in item["options"] if o["text"] == accepted[item["id"]]]
        keys.append(key)
        assert client.get(f"/v1/questions/{item['id']}").json() == item
    assert len(set(keys)) == 4  # the accepted answer is not always in the same place


def test_paging_topic_and_text_filters(client: TestClient) -> None:
    first = client.get("/v1/questions", params={"limit": 10}).json()
    second = client.get("/v1/questions", params={"limit": 10, "offset": 10}).json()
    assert first["total"] == 42 and len(first["items"]) == 10
    assert not {i["id"] for i in first["items"]} & {i["id"] for i in second["items"]}
    zero = client.get("/v1/questions", params={"topic": "zero-fsdp"}).json()
    assert zero["total"] >= 4 and all("zero-fsdp" in i["topics"] for i in zero["items"])
    found = client.get("/v1/questions", params={"q": "ZERO"}).json()
    assert found["total"] == 2


def test_topics_with_counts(client: TestClient) -> None:
    topics = {t["id"]: t for t in client.get("/v1/topics").json()}
    assert topics["pipeline-parallelism"]["name"] == "Pipeline parallelism"
    assert topics["collectives"]["count"] > 0
    assert len(topics) == 12


def test_unknown_id_and_bad_parameters(client: TestClient) -> None:
    missing = client.get("/v1/questions/q_doesnotexist")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    bad = client.get("/v1/questions", params={"limit": "many"})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"]["fields"][0]["field"] == "query.limit"


def test_index_from_another_model_is_refused(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    other = FakeEncoder(model_id="another-model@1")
    with TestClient(create_app(settings, lambda _: other, load_in_background=False)) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 503
        assert "re-ingest" in ready.json()["error"]["message"]
        assert c.get("/healthz").status_code == 200
        assert c.get("/v1/questions").status_code == 200  # the bank itself still serves


def test_not_ready_before_any_ingestion(settings: Settings, fake_encoder: FakeEncoder) -> None:
    with TestClient(create_app(settings, lambda _: fake_encoder, load_in_background=False)) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 503 and "tutor ingest" in ready.json()["error"]["message"]
        assert ready.headers["Retry-After"]


def test_broken_authored_roles_keep_the_service_not_ready(settings: Settings, fake_encoder: FakeEncoder,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A roles file with a cue on both sides is refused at start-up, not on the first graded answer."""
    ingest_with(settings, fake_encoder)
    broken = tmp_path / "roles.yaml"
    broken.write_text("questions:\n  - id: q_x\n    roles:\n      - {names: [sync], cues: [wait]}\n"
                      "      - {names: [async], cues: [wait]}\n")
    monkeypatch.setattr(roles, "ROLES_PATH", broken)
    roles.authored_roles.cache_clear()
    try:
        with TestClient(create_app(settings, lambda _: fake_encoder, load_in_background=False)) as c:
            ready = c.get("/readyz")
            assert ready.status_code == 503
            assert "authored roles" in ready.json()["error"]["message"]
    finally:
        roles.authored_roles.cache_clear()
