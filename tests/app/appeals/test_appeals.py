"""Appeals end to end: filed over HTTP, reviewed with `tutor appeals`, accepted answers teach the grader."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.db import make_engine, make_sessionmaker, transaction
from app.models import Card, LabelledExample
from tests.conftest import Tutor


def _answer(client: TestClient, learner: str, answer: str) -> tuple[str, dict]:
    sid = client.post("/v1/sessions", json={"learner_id": learner, "length": 1, "topics": ["zero-fsdp"]}).json()["id"]
    question = client.get(f"/v1/sessions/{sid}/next").json()["question"]
    result = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": question["id"], "answer": answer}).json()
    return question["id"], result


def test_appeal_review_and_learning(client: TestClient, tutor: Tutor) -> None:
    learner = client.post("/v1/learners", json={}).json()["id"]
    answer = "it keeps one copy of everything per GPU but smaller"
    qid, first = _answer(client, learner, answer)
    assert first["verdict"] != "correct"
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    factory = make_sessionmaker(engine)
    with transaction(factory) as s:
        due_before = s.scalars(select(Card.due).where(Card.learner_id == learner)).one()
    appeal = client.post(f"/v1/attempts/{first['attempt_id']}/appeal",
                         json={"claimed_verdict": "correct", "learner_id": learner}).json()
    with transaction(factory) as s:
        due_after = s.scalars(select(Card.due).where(Card.learner_id == learner)).one()
    assert appeal["rescheduled"] is True and due_after > due_before  # re-rated Good instead of Again/Hard

    listed = json.loads(tutor("appeals", "list", "--json").stdout)
    assert [(a["id"], a["answer"], a["original_verdict"], a["claimed_verdict"]) for a in listed] == [
        (appeal["id"], answer, first["verdict"], "correct")
    ]
    tutor("appeals", "accept", appeal["id"])
    tutor("appeals", "accept", appeal["id"], code=1)  # already resolved
    assert json.loads(tutor("appeals", "list", "--json").stdout) == []
    with transaction(factory) as s:
        examples = [(e.question_id, e.answer, e.label) for e in s.scalars(select(LabelledExample))]
    engine.dispose()
    assert examples == [(qid, answer, "correct")]

    # The same answer to the same question is now graded with the accepted example as evidence.
    other = client.post("/v1/learners", json={}).json()["id"]
    for _ in range(100):  # new sessions pick among the topic's questions at random
        sid = client.post("/v1/sessions", json={"learner_id": other, "length": 1, "topics": ["zero-fsdp"]}).json()["id"]
        if (q := client.get(f"/v1/sessions/{sid}/next").json()["question"])["id"] == qid:
            break
    assert q["id"] == qid
    again = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": q["id"], "answer": answer}).json()
    assert again["verdict"] == "correct"


def test_only_the_attempts_owner_may_appeal_it(client: TestClient, make_key) -> None:  # type: ignore[no-untyped-def]
    owner = client.post("/v1/learners", json={}).json()["id"]
    other = client.post("/v1/learners", json={}).json()["id"]
    _, first = _answer(client, owner, "no idea")
    url = f"/v1/attempts/{first['attempt_id']}/appeal"
    anonymous = client.post(url, json={})
    missing = client.post("/v1/attempts/a_missing/appeal", json={})
    assert anonymous.status_code == missing.status_code == 404  # the same answer as for an attempt that does not exist
    assert anonymous.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
    assert client.post(url, json={"learner_id": other}).status_code == 404
    _, key = make_key()
    assert client.post(url, json={}, headers={"X-API-Key": key}).status_code == 404  # a key without `author`
    assert client.post(url, json={"learner_id": owner}).status_code == 201


def test_a_grading_api_attempt_is_appealed_only_with_its_own_key(client: TestClient, make_key) -> None:  # type: ignore[no-untyped-def]
    _, key = make_key()
    _, other_key = make_key()
    graded = client.post("/v1/grade", headers={"X-API-Key": key}, json={
        "question": "What does all-gather do?", "reference_answers": ["every rank ends with all chunks"],
        "answer": "no idea"}).json()
    url = f"/v1/attempts/{graded['attempt_id']}/appeal"
    assert client.post(url, json={}).status_code == 404
    assert client.post(url, json={}, headers={"X-API-Key": other_key}).status_code == 404
    assert client.post(url, json={}, headers={"X-API-Key": key}).status_code == 201
