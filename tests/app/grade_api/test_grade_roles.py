"""Roles through the grading API: a client's two-sided question graded for swaps, and bad roles refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

SYNC_ASYNC = {
    "question": "What is the difference between synchronous and asynchronous SGD?",
    "reference_answers": ["Sync SGD has all workers all-reduce before updating; async SGD allows stale updates"],
    "roles": [
        {"names": ["sync SGD", "synchronous SGD"], "cues": ["wait", "barrier", "every step", "averages"]},
        {"names": ["async SGD", "asynchronous SGD"], "cues": ["stale", "whenever", "own pace"]},
    ],
}
SWAP = "sync SGD: each worker pushes updates whenever it finishes; async SGD: everybody waits and averages"
RIGHT = "sync SGD waits for every worker and averages each step; async SGD updates whenever a worker is done"


def _grade(client: TestClient, secret: str, body: dict[str, Any]) -> dict[str, Any]:
    res = client.post("/v1/grade", json=body, headers={"X-API-Key": secret})
    assert res.status_code == 200, res.text
    result: dict[str, Any] = res.json()
    return result


def test_a_registered_rubric_keeps_its_roles_and_grades_a_swap(
        client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key()
    created = client.post("/v1/rubrics", json=SYNC_ASYNC, headers={"X-API-Key": secret})
    assert created.status_code == 201, created.text
    rid = created.json()["rubric_id"]
    stored = client.get(f"/v1/rubrics/{rid}", headers={"X-API-Key": secret}).json()
    assert [side["names"][0] for side in stored["roles"]] == ["sync SGD", "async SGD"]

    swapped = _grade(client, secret, {"rubric_id": rid, "answer": SWAP})
    assert swapped["verdict"] == "incorrect"
    assert "roles_swapped" in swapped["flags"]
    assert "async SGD" in swapped["feedback"] and "sync SGD" in swapped["feedback"], swapped["feedback"]
    right = _grade(client, secret, {"rubric_id": rid, "answer": RIGHT})
    assert "roles_swapped" not in right["flags"]


def test_an_inline_question_with_roles_grades_a_swap(
        client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key()
    swapped = _grade(client, secret, {**SYNC_ASYNC, "answer": SWAP})
    assert swapped["verdict"] == "incorrect" and "roles_swapped" in swapped["flags"]
    assert "whenever" in swapped["feedback"], swapped["feedback"]  # the word it rests on


ONE_SIDE = [{"names": ["sync"], "cues": ["wait"]}]
SHARED = [{"names": ["sync"], "cues": ["wait"]}, {"names": ["async"], "cues": ["wait"]}]
NO_WORD = [{"names": ["sync"], "cues": ["!!!"]}, {"names": ["async"], "cues": ["stale"]}]
TWO_IMPLIED = [{"names": ["sync"], "cues": ["wait"], "implied": True},
               {"names": ["async"], "cues": ["stale"], "implied": True}]
NO_CUES = [{"names": ["sync"], "cues": []}, {"names": ["async"], "cues": ["stale"]}]


@pytest.mark.parametrize(("roles", "message"), [
    (ONE_SIDE, "two to"), (SHARED, "share"), (NO_WORD, "a word"), (TWO_IMPLIED, "implied"), (NO_CUES, "cues"),
])
def test_bad_roles_are_refused_with_a_clear_error(client: TestClient, make_key: Callable[..., tuple[str, str]],
                                                  roles: list[dict[str, Any]], message: str) -> None:
    _, secret = make_key()
    body = {**SYNC_ASYNC, "roles": roles}
    for path, payload in (("/v1/rubrics", body), ("/v1/grade", {**body, "answer": SWAP})):
        res = client.post(path, json=payload, headers={"X-API-Key": secret})
        assert res.status_code == 422, (path, res.text)
        assert message in res.text, res.text


def test_roles_with_a_bank_question_are_refused(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key()
    res = client.post("/v1/grade", json={"question_id": "q_c404f730f66d", "answer": SWAP,
                                         "roles": SYNC_ASYNC["roles"]}, headers={"X-API-Key": secret})
    assert res.status_code == 422
    assert "roles go with an inline question" in res.text
