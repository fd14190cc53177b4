"""Text with NUL or other control characters: a 422 in the error shape (or a 404 for an id), never a 500.

PostgreSQL refuses NUL in text, so without a check at the edge such input reached the database and
answered a bare 500, or (POST /v1/grade, through the attempt journal) answered 200 and was then lost.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.exc import DataError

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.errors import render_error
from app.keys.service import create_key
from app.main import create_app
from app.models import Attempt, Learner
from app.serving.journal import REJECTED, AttemptJournal
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder

NUL = "\x00"
INLINE = {
    "question": "What does all-gather do?",
    "reference_answers": ["Every rank ends with the concatenation of all ranks' chunks"],
}


@pytest.fixture
def client(settings: Settings, fake_encoder: FakeEncoder) -> Iterator[TestClient]:
    ingest_with(settings, fake_encoder)
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def api_key(client: TestClient) -> str:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        _, secret = create_key(s, name="test", scopes=("grade", "author"))
    engine.dispose()
    return secret


def _count(client: TestClient, model: Any) -> int:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    if runtime.journal is not None:
        runtime.journal.flush()
    with transaction(runtime.factory) as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def _refused(res: Any, *, statuses: tuple[int, ...] = (422,)) -> dict[str, Any]:
    """A refusal in the project's error shape that names no SQL and echoes no NUL."""
    assert res.status_code in statuses, (res.status_code, res.text)
    error = res.json()["error"]
    assert error["code"] and error["message"]
    for word in ("SELECT", "INSERT", "UPDATE", "parameters", "[SQL"):
        assert word not in res.text
    return dict(error)


def test_post_grade_with_nul_is_422_and_nothing_is_journaled(client: TestClient, api_key: str) -> None:
    headers = {"X-API-Key": api_key}
    for body in (
        {**INLINE, "answer": f"every{NUL}one"},
        {**INLINE, "question": f"What{NUL}?", "answer": "a"},
        {**INLINE, "reference_answers": [f"chunks{NUL}"], "answer": "a"},
        {**INLINE, "examples": [{"answer": f"x{NUL}", "label": "correct"}], "answer": "a"},
        {"question_id": f"q_{NUL}", "answer": "a"},
        {"rubric_id": f"r_{NUL}", "answer": "a"},
        {**INLINE, "answer": "a", "choice": f"B{NUL}"},
    ):
        res = client.post("/v1/grade", json=body, headers=headers)
        assert _refused(res)["code"] == "invalid_request"
        assert "attempt_id" not in res.text
    assert _count(client, Attempt) == 0
    folder = client.app.state.runtime.settings.data_dir / "journal"  # type: ignore[attr-defined]
    assert not (folder / REJECTED).exists()


@pytest.mark.parametrize("escape", ["\\u0000", "\\u001b", "\\ud800"])
def test_json_escapes_of_refused_characters_are_422(client: TestClient, api_key: str, escape: str) -> None:
    """The grading hot path parses the raw body itself: escapes are refused there as in the route."""
    body = ('{"question": "What does all-gather do?", "reference_answers": ["every chunk"], '
            f'"answer": "every{escape}one"}}')
    res = client.post("/v1/grade", content=body.encode(),
                      headers={"X-API-Key": api_key, "Content-Type": "application/json"})
    assert _refused(res)["code"] == "invalid_request"
    res = client.post("/v1/learners", content=f'{{"display_name": "Ada{escape}"}}'.encode(),
                      headers={"Content-Type": "application/json"})
    _refused(res)


def test_every_endpoint_refuses_nul_in_its_body(client: TestClient, api_key: str) -> None:
    headers = {"X-API-Key": api_key}
    learner = client.post("/v1/learners", json={}).json()["id"]
    sid = client.post("/v1/sessions", json={"learner_id": learner, "length": 1}).json()["id"]
    question = client.get(f"/v1/sessions/{sid}/next").json()["question"]
    answered = client.post(f"/v1/sessions/{sid}/answers", json={"question_id": question["id"], "answer": "a sum"})
    attempt = answered.json()["attempt_id"]
    calls: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        ("/v1/learners", {"display_name": f"Ada{NUL}"}, {}),
        ("/v1/sessions", {"learner_id": f"{learner}{NUL}"}, {}),
        ("/v1/sessions", {"learner_id": learner, "topics": [f"collectives{NUL}"]}, {}),
        (f"/v1/sessions/{sid}/answers", {"question_id": question["id"], "answer": f"a{NUL}sum"}, {}),
        (f"/v1/sessions/{sid}/answers", {"question_id": f"{question['id']}{NUL}", "answer": "a sum"}, {}),
        (f"/v1/attempts/{attempt}/appeal", {"learner_id": learner, "comment": f"but{NUL}"}, {}),
        (f"/v1/attempts/{attempt}/appeal", {"learner_id": f"{learner}{NUL}"}, {}),
        ("/v1/grade/batch", {"items": [{**INLINE, "answer": f"a{NUL}"}]}, headers),
        ("/v1/grade/batch", {"items": [{"question_id": question["id"], "answer": f"a{NUL}"}]}, headers),
        ("/v1/rubrics", {**INLINE, "question": f"What{NUL}?"}, headers),
        ("/v1/rubrics", {**INLINE, "wrong_answers": [f"sum{NUL}"]}, headers),
        ("/v1/rubrics", {**INLINE, "explanation": f"because{NUL}"}, headers),
    ]
    for path, body, extra in calls:
        _refused(client.post(path, json=body, headers=extra))
    with transaction(client.app.state.runtime.factory) as s:  # type: ignore[attr-defined]
        assert s.scalar(select(func.count()).select_from(Learner)) == 1


def test_chat_and_ask_with_nul_answer_no_5xx(client: TestClient) -> None:
    """Refused by the schema, or (until it checks) by the database error's 4xx: never a 500."""
    for path in ("/v1/chat", "/v1/ask"):
        body = {"message": f"quiz me{NUL}"} if path == "/v1/chat" else {"text": f"reduce-scatter{NUL}"}
        res = client.post(path, json=body)
        if res.status_code < 400:  # SQLite stores NUL, and /v1/ask reads nothing with it
            continue
        _refused(res, statuses=(400, 422))
    stream = client.post("/v1/chat/stream", json={"message": f"quiz me{NUL}"})
    assert stream.status_code < 500


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/learners/{id}/progress"),
        ("GET", "/v1/sessions/{id}/next"),
        ("POST", "/v1/sessions/{id}/answers"),
        ("POST", "/v1/attempts/{id}/appeal"),
        ("GET", "/v1/rubrics/{id}"),
        ("GET", "/v1/questions/{id}"),
        ("GET", "/v1/chat/conversations/{id}"),
        ("GET", "/v1/demos/runs/{id}"),
        ("GET", "/v1/study/topics/{id}"),
    ],
)
def test_ids_with_nul_in_the_path_are_404_or_422(client: TestClient, api_key: str, method: str, path: str) -> None:
    body = {"question_id": "q_x", "answer": "a"} if path.endswith("/answers") else {}
    headers = {"X-API-Key": api_key}
    if "/chat/" in path:
        headers["Authorization"] = "Bearer " + client.post("/v1/chat/conversations").json()["token"]
    res = client.request(method, path.replace("{id}", "x%00y"), json=body, headers=headers)
    _refused(res, statuses=(404, 422, 503))


@pytest.mark.parametrize("query", ["topic=a%00b", "q=a%00b"])
def test_query_text_with_nul_is_refused_or_finds_nothing(client: TestClient, query: str) -> None:
    res = client.get(f"/v1/questions?{query}")
    if res.status_code == 200:
        assert res.json()["items"] == []
    else:
        _refused(res)


def test_a_database_data_error_is_a_4xx_without_sql_or_values(caplog: pytest.LogCaptureFixture) -> None:
    exc = DataError("INSERT INTO attempts (answer) VALUES (%(answer)s)", {"answer": "secret answer"},
                    ValueError("PostgreSQL text fields cannot contain NUL (0x00) bytes"))
    with caplog.at_level(logging.WARNING):
        res = render_error(exc)
    assert res is not None and 400 <= res.status_code < 500
    body = bytes(res.body).decode()
    assert "invalid_request" in body and "INSERT" not in body and "secret answer" not in body
    assert "secret answer" not in caplog.text and "INSERT" not in caplog.text


class _Call:
    key_id, endpoint, items = "k_1", "grade", 1

    def __init__(self) -> None:
        self.attempts = [{"id": "a_1", "answer": "a learner's private answer"}]


def test_the_rejected_file_is_private_and_its_log_line_names_no_answer(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    journal = AttemptJournal(tmp_path, writer=None, kind=None)  # type: ignore[arg-type]
    refused = DataError("INSERT INTO attempts (answer) VALUES (%(answer)s)",
                        {"answer": "a learner's private answer"}, ValueError("NUL"))
    old = os.umask(0o022)
    try:
        with caplog.at_level(logging.ERROR):
            journal._reject(_Call(), refused)  # type: ignore[arg-type]
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / REJECTED).stat().st_mode) == 0o600
    assert "private answer" not in caplog.text and "INSERT" not in caplog.text
    (tmp_path / REJECTED).chmod(0o644)  # a file an older version left readable is made private
    journal._reject(_Call(), refused)  # type: ignore[arg-type]
    assert stat.S_IMODE((tmp_path / REJECTED).stat().st_mode) == 0o600


def test_engines_never_print_statement_parameters(db_url: str) -> None:
    """A failed statement's log line and error never carry a learner's answer (SQLAlchemy hide_parameters)."""
    from app.db import make_engine

    engine = make_engine(db_url)
    try:
        assert engine.hide_parameters
    finally:
        engine.dispose()
