"""Learners, quiz sessions, answers, idempotency, FSRS schedules, appeals and bad input."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient


def _learner(client: TestClient) -> str:
    res = client.post("/v1/learners", json={})
    assert res.status_code == 201
    return str(res.json()["id"])


def _session(client: TestClient, learner: str, **kw: Any) -> str:
    res = client.post("/v1/sessions", json={"learner_id": learner, **kw})
    assert res.status_code == 201, res.text
    return str(res.json()["id"])


def _accepted_key(client: TestClient, question: dict[str, Any]) -> tuple[str, str]:
    """(accepted option key, a wrong option key), read through the author view of the CLI's data."""
    from app.db import make_engine, make_sessionmaker, transaction
    from app.models import Question

    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        row = s.get(Question, question["id"])
        assert row is not None
        accepted = row.accepted_answers[0]
    engine.dispose()
    right = next(o["key"] for o in question["options"] if o["text"] == accepted)
    wrong = next(o["key"] for o in question["options"] if o["text"] != accepted)
    return right, wrong


def test_quiz_flow_with_idempotent_retry(client: TestClient) -> None:
    learner = _learner(client)
    sid = _session(client, learner, topics=["collectives"], length=2, mode="new")
    first = client.get(f"/v1/sessions/{sid}/next").json()
    assert first["done"] is False and "collectives" in first["question"]["topics"]
    assert client.get(f"/v1/sessions/{sid}/next").json()["question"] == first["question"]  # same until answered
    question = first["question"]
    body = {"question_id": question["id"], "answer": "something about ranks and sums"}
    if question["options"]:
        body = {**body, "choice": _accepted_key(client, question)[0]}
    res = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k1"})
    assert res.status_code == 200, res.text
    result = res.json()
    assert result["verdict"] in {"correct", "partial", "incorrect"}
    assert result["citation"]["file"].endswith(".txt") and result["citation"]["number"] >= 1
    assert result["explanation"]["kind"] in {"own", "none"}  # no notes in this bank, and no stand-in
    if result["explanation"]["kind"] == "none":
        assert result["explanation"]["text"] is None and result["explanation"]["passages"] == []
    assert datetime.fromisoformat(result["schedule"]["due"])
    assert result["progress"]["answered"] == 1 and result["replayed"] is False
    again = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k1"}).json()
    assert again["attempt_id"] == result["attempt_id"] and again["replayed"] is True
    assert again["verdict"] == result["verdict"] and again["progress"]["answered"] == 1
    other_key = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k2"})
    assert other_key.status_code == 409 and other_key.json()["error"]["code"] == "conflict"
    second = client.get(f"/v1/sessions/{sid}/next").json()["question"]
    assert second["id"] != question["id"]
    progress = client.get(f"/v1/learners/{learner}/progress").json()
    assert progress["answered"] == 1 and progress["history"][0]["attempt_id"] == result["attempt_id"]
    assert {m["topic"] for m in progress["mastery"]} >= {"collectives"}


def test_multiple_choice_is_exact_and_scheduled_by_fsrs(client: TestClient) -> None:
    learner = _learner(client)
    sid = _session(client, learner, topics=["zero-fsdp"], length=5, mode="new")
    answered = 0
    for _ in range(5):
        nxt = client.get(f"/v1/sessions/{sid}/next").json()
        if nxt["done"]:
            break
        q = nxt["question"]
        if not q["options"]:
            res = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": q["id"], "answer": "idk"})
            assert res.json()["verdict"] == "incorrect"
            continue
        right, wrong = _accepted_key(client, q)
        pick = right if answered % 2 == 0 else wrong
        res = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": q["id"], "answer": pick, "choice": pick})
        data = res.json()
        assert data["verdict"] == ("correct" if pick == right else "incorrect"), data
        assert data["schedule"]["rating"] == (3 if pick == right else 1)  # Good / Again
        answered += 1
    assert answered >= 1
    progress = client.get(f"/v1/learners/{learner}/progress").json()
    assert progress["streak"] == 1 and progress["answered"] >= answered


def test_review_mode_with_nothing_due(client: TestClient) -> None:
    sid = _session(client, _learner(client), mode="review")
    nxt = client.get(f"/v1/sessions/{sid}/next").json()
    assert nxt["done"] is True and nxt["reason"] == "no reviews are due"


def test_appeal_keeps_both_verdicts_once(client: TestClient) -> None:
    learner = _learner(client)
    sid = _session(client, learner, length=1, mode="new")
    q = client.get(f"/v1/sessions/{sid}/next").json()["question"]
    res = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": q["id"], "answer": "no idea"}).json()
    assert res["verdict"] == "incorrect"
    appeal = client.post(f"/v1/attempts/{res['attempt_id']}/appeal",
                         json={"comment": "I meant it", "learner_id": learner})
    assert appeal.status_code == 201, appeal.text
    data = appeal.json()
    assert (data["original_verdict"], data["claimed_verdict"], data["status"]) == ("incorrect", "correct", "open")
    assert data["rescheduled"] is True
    assert client.post(f"/v1/attempts/{res['attempt_id']}/appeal", json={"learner_id": learner}).status_code == 409
    assert client.post("/v1/attempts/a_missing/appeal", json={}).status_code == 404
    done = client.get(f"/v1/sessions/{sid}/next").json()
    assert done["done"] is True and done["progress"]["answered"] == 1


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("post", "/v1/sessions", {}, 422, "learner_id"),
        ("post", "/v1/sessions", {"learner_id": "l_x", "length": "ten"}, 422, "length"),
        ("post", "/v1/sessions", {"learner_id": "l_x", "length": 500}, 422, "length"),
        ("post", "/v1/sessions", {"learner_id": "l_x", "mode": "cram"}, 422, "mode"),
        ("post", "/v1/sessions", {"learner_id": "l_unknown"}, 404, None),
        ("get", "/v1/sessions/s_unknown/next", None, 404, None),
        ("post", "/v1/sessions/s_unknown/answers", {"question_id": "q", "answer": "a"}, 404, None),
        ("get", "/v1/learners/l_unknown/progress", None, 404, None),
        ("post", "/v1/learners", {"display_name": 5}, 422, "display_name"),
        ("post", "/v1/ask", {}, 422, "text"),
        ("post", "/v1/ask", {"text": "x" * 501}, 422, "text"),
    ],
)
def test_bad_input(client: TestClient, method: str, path: str, body: Any, status: int, field: str | None) -> None:
    res = client.request(method, path, json=body)
    assert res.status_code == status, res.text
    error = res.json()["error"]
    assert error["message"]
    if field:
        assert field in [f["field"] for f in error["details"]["fields"]]


def test_answer_size_and_blank(client: TestClient) -> None:
    sid = _session(client, _learner(client))
    q = client.get(f"/v1/sessions/{sid}/next").json()["question"]
    for answer, fragment in [("x" * 2001, "2000"), ("   ", "empty"), ("", "at least 1")]:
        res = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": q["id"], "answer": answer})
        assert res.status_code == 422
        detail = res.json()["error"]["details"]["fields"][0]
        assert detail["field"] == "answer" and fragment in detail["message"]
    wrong_q = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": "q_other", "answer": "a"})
    assert wrong_q.status_code == 409


def test_oversized_body_is_refused_before_parsing(client: TestClient) -> None:
    res = client.post(
        "/v1/learners",
        content=b'{"display_name": "' + b"x" * 70_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert res.status_code == 413
    assert "64 KB" in res.json()["error"]["message"]
