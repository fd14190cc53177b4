"""Every route, fed missing fields, wrong types, oversize text and unknown ids: a clear 4xx, never a 500."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

JUNK_BODIES: list[Any] = [
    None,
    {},
    [],
    "text",
    {"answer": 5, "question_id": ["x"], "text": {"a": 1}, "learner_id": 3.5, "items": "no"},
    {"answer": "x" * 5000, "text": "y" * 5000, "question": "z" * 5000, "message": "m" * 5000},
    {"learner_id": "l_unknown", "question_id": "q_unknown", "rubric_id": "r_unknown", "answer": "a"},
]
SKIP = {"/slack/events", "/slack/install", "/slack/oauth_redirect"}  # Slack's own protocol, tested in tests/app/slack


def _routes(client: TestClient) -> list[tuple[str, str]]:
    spec = client.get("/openapi.json").json()
    return [(method.upper(), path) for path, ops in spec["paths"].items() for method in ops if path not in SKIP]


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "unknown_id_123", path)


def test_no_route_answers_500_to_bad_input(client: TestClient) -> None:
    routes = _routes(client)
    assert len(routes) > 20
    failures = []
    for method, path in routes:
        url = _concrete(path)
        for body in JUNK_BODIES:
            res = client.request(method, url, json=body, headers={"X-API-Key": "gt_wrong"})
            if res.status_code >= 500 and res.status_code != 503:
                failures.append((method, url, body if body is None else str(body)[:40], res.status_code))
            elif res.status_code >= 400:
                error = (
                    res.json().get("error", {})
                    if res.headers.get("content-type", "").startswith("application/json")
                    else {}
                )
                if not error.get("message"):
                    failures.append((method, url, "no error message", res.status_code))
    assert failures == []


@pytest.mark.parametrize(
    "path",
    ["/v1/questions/unknown", "/v1/sessions/unknown/next", "/v1/learners/unknown/progress", "/v1/demos/runs/unknown"],
)
def test_unknown_ids_are_404_or_unavailable(client: TestClient, path: str) -> None:
    assert client.get(path).status_code in (404, 503)
