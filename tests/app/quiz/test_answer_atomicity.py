"""An answer is stored whole or not at all: concurrent retries, a crash mid-write, an old incomplete row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.models import Attempt, QuizSession

ROOT = Path(__file__).resolve().parents[3]
PARALLEL = 20


def _start(client: TestClient, length: int = 1) -> tuple[str, dict[str, Any]]:
    """A new session and the body of an answer to its first question."""
    learner = client.post("/v1/learners", json={}).json()["id"]
    res = client.post("/v1/sessions", json={"learner_id": learner, "length": length, "mode": "new"})
    assert res.status_code == 201, res.text
    sid = str(res.json()["id"])
    return sid, _answer_body(client, sid)


def _answer_body(client: TestClient, sid: str) -> dict[str, Any]:
    question = client.get(f"/v1/sessions/{sid}/next").json()["question"]
    body: dict[str, Any] = {"question_id": question["id"], "answer": "it sums the gradients across ranks"}
    if question["options"]:
        body["choice"] = question["options"][0]["key"]
    return body


def _attempts(settings: Settings, sid: str) -> list[Attempt]:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as s:
            return list(s.scalars(select(Attempt).where(Attempt.session_id == sid)))
    finally:
        engine.dispose()


def _settings(client: TestClient) -> Settings:
    settings: Settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    return settings


def test_parallel_retries_with_one_key_make_one_attempt(client: TestClient) -> None:
    """Twenty posts of one answer at once, one Idempotency-Key: all 200, one attempt, one schedule."""
    rounds = 3
    sid, _ = _start(client, length=rounds)
    for n in range(rounds):
        body = _answer_body(client, sid)
        key = f"same-{n}"
        barrier = threading.Barrier(PARALLEL)

        def post(_: int, body: dict[str, Any] = body, key: str = key, barrier: threading.Barrier = barrier) -> Any:
            barrier.wait()
            try:
                return client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": key})
            except Exception as exc:  # a server error, raised by the test client
                return exc

        with ThreadPoolExecutor(PARALLEL) as pool:
            responses = list(pool.map(post, range(PARALLEL)))
        failed = [r if isinstance(r, Exception) else (r.status_code, r.text[:300])
                  for r in responses if isinstance(r, Exception) or r.status_code != 200]
        assert not failed, f"round {n}: {len(failed)} of {PARALLEL} failed: {str(failed[:2])[:1500]}"
        results = [r.json() for r in responses]
        assert len({r["attempt_id"] for r in results}) == 1
        assert sum(not r["replayed"] for r in results) == 1
        assert len({json.dumps(r["schedule"], sort_keys=True) for r in results}) == 1
        assert {r["progress"]["answered"] for r in results} == {n + 1}
    stored = _attempts(_settings(client), sid)
    assert len(stored) == rounds
    assert all("schedule" in a.result for a in stored)


_CHILD = """
import json, os, signal, sys
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from app.config import Settings
from app.main import create_app
from app.quiz import service
from tests.fakes import FakeEncoder

data_dir, db_url, sid, body, key, where = sys.argv[1:]


def die(*_args, **_kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


settings = Settings(data_dir=Path(data_dir), database_url=db_url)
app = create_app(settings, lambda _: FakeEncoder(), load_in_background=False)
with TestClient(app) as client:
    if where == "after-insert":
        # Right after the attempt's INSERT reaches the database.
        def after(conn, cursor, statement, *rest):
            if statement.lstrip().upper().startswith("INSERT INTO ATTEMPTS"):
                die()
        event.listen(Engine, "after_cursor_execute", after)
    else:
        # After every write of the answer, before the request's transaction commits.
        service.session_progress = die
    client.post(f"/v1/sessions/{sid}/answers", json=json.loads(body), headers={"Idempotency-Key": key})
print("not killed")
sys.exit(3)
"""


@pytest.mark.parametrize("where", ["after-insert", "before-commit"])
def test_a_crash_while_answering_stores_nothing(client: TestClient, where: str) -> None:
    """SIGKILL of the process in the middle of recording an answer: no attempt is stored, and the
    retry with the same key is graded afresh."""
    settings = _settings(client)
    sid, body = _start(client)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(settings.data_dir), settings.db_url, sid, json.dumps(body), "k", where],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stdout[-2000:], child.stderr[-2000:])
    assert [(a.id, a.result.get("schedule")) for a in _attempts(settings, sid)] == []
    retry = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k"})
    assert retry.status_code == 200, retry.text
    assert retry.json()["replayed"] is False and retry.json()["schedule"]["due"]
    again = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k"})
    assert again.status_code == 200 and again.json()["attempt_id"] == retry.json()["attempt_id"]
    assert len(_attempts(settings, sid)) == 1


def test_an_error_while_answering_stores_nothing(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that fails after writing the attempt rolls all of it back; the retry succeeds."""
    from app.quiz import service

    sid, body = _start(client)
    real = service.session_progress

    def fail_once(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(service, "session_progress", real)
        raise RuntimeError("injected failure after the attempt was written")

    monkeypatch.setattr(service, "session_progress", fail_once)
    with pytest.raises(RuntimeError, match="injected"):
        client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k"})
    assert _attempts(_settings(client), sid) == []
    retry = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k"})
    assert retry.status_code == 200, retry.text
    assert retry.json()["replayed"] is False


def test_replay_of_an_attempt_stored_without_its_schedule(client: TestClient) -> None:
    """An attempt stored without `schedule` (as an interrupted write once could leave it) is
    replayed with the schedule its review produced, not a 500."""
    settings = _settings(client)
    sid, body = _start(client)
    first = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k"})
    assert first.status_code == 200, first.text
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as s:
            attempt = s.scalars(select(Attempt).where(Attempt.session_id == sid)).one()
            attempt.result = {k: v for k, v in attempt.result.items() if k != "schedule"}
        with transaction(make_sessionmaker(engine)) as s:
            assert "schedule" not in s.scalars(select(Attempt).where(Attempt.session_id == sid)).one().result
            assert s.scalar(select(func.count()).select_from(QuizSession).where(QuizSession.id == sid)) == 1
    finally:
        engine.dispose()
    replay = client.post(f"/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": "k"})
    assert replay.status_code == 200, replay.text
    data = replay.json()
    assert data["replayed"] is True and data["attempt_id"] == first.json()["attempt_id"]
    assert data["schedule"] == first.json()["schedule"]
