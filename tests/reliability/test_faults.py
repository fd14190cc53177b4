"""Faults of what the service stands on, each on an instance the test starts itself: PostgreSQL stopped
and started again, Redis killed and started again, the disk filling up during an ingestion, the demo
worker killed in the middle of a run.

Each time: answers come quickly, as 503 in the project's error shape (never a 500, never a hang), the
service says why it is not ready, what was live keeps serving, and once the fault is gone the service
recovers without a restart. (A damaged index or encoder: tests/reliability/test_integrity.py.)

Timeouts here only keep a broken build from hanging the suite; no test asserts how fast anything is.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from app.config import Settings, get_settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from app.main import create_app
from app.models import ACTIVE, Attempt, BankState, Question
from ingest.embedder import model_id_for
from ingest.index import INDEX_VERSION_KEY
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder
from tests.reliability.instances import (
    PrivatePostgres,
    PrivateRedis,
    Unavailable,
    fill,
    private_postgres,
    private_redis,
    small_filesystem,
)
from tests.serving import serving_in_thread
from tests.worker.helpers import LONG_RUN, TOKEN, free_port, start_worker, stop
from worker.procs import end_group, group_members

HANG_GUARD_S = 30.0  # a request that takes this long is a hang


def _until(probe: Callable[[], Any], done: Callable[[Any], bool], what: str, limit: float = 60) -> Any:
    """Poll probe() until done(value); fail naming `what` (and the last value) after `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: still {value!r} after {limit:g}s")
        time.sleep(0.1)


def _assert_error_shape(reply: httpx.Response, status: int = 503) -> dict[str, Any]:
    assert reply.status_code == status, (reply.request.url, reply.status_code, reply.text)
    body = reply.json()
    assert set(body) == {"error"} and body["error"]["message"] and body["error"]["code"], body
    if status == 503:
        assert int(reply.headers["Retry-After"]) > 0
    for word in ("Traceback", "psycopg", "sqlalchemy", "redis.exceptions", "Error in "):
        assert word not in reply.text, reply.text
    error: dict[str, Any] = body["error"]
    return error


def _api_key(settings: Settings, scopes: tuple[str, ...] = ("grade",)) -> str:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, secret = create_key(session, name="faults", scopes=scopes, rate_limit="100000/minute")
    finally:
        engine.dispose()
    return secret


def _live_version(settings: Settings) -> str:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            state = session.get(BankState, INDEX_VERSION_KEY)
            assert state is not None
            return state.value
    finally:
        engine.dispose()


GRADE = {"question": "What does all-gather do?", "reference_answers": ["every rank ends with every shard"],
         "answer": "each GPU ends with all the pieces"}


# --- PostgreSQL ---------------------------------------------------------------------------------------


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL of this test's own (never the machine's shared one)."""
    try:
        with private_postgres() as instance:
            yield instance
    except Unavailable as exc:
        pytest.skip(f"no private PostgreSQL: {exc}")


def _db_calls(http: httpx.Client, learner: str, question: str, key: str) -> dict[str, httpx.Response]:
    """Calls that read or write the database."""
    return {
        "readyz": http.get("/readyz"),
        "new learner": http.post("/v1/learners", json={}),
        "session": http.post("/v1/sessions", json={"learner_id": learner}),
        "progress": http.get(f"/v1/learners/{learner}/progress"),
        "questions": http.get("/v1/questions", params={"q": "all-reduce"}),
        "question": http.get(f"/v1/questions/{question}"),
        "grade": http.post("/v1/grade", headers={"X-API-Key": key}, json=GRADE),
    }


def _stored(settings: Settings, attempt_ids: list[str]) -> set[str]:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return set(session.scalars(select(Attempt.id).where(Attempt.id.in_(attempt_ids))))
    finally:
        engine.dispose()


def test_postgres_stopped_answers_503_quickly_and_the_service_recovers_when_it_is_back(
        postgres: PrivatePostgres, data_dir: Path) -> None:
    encoder = FakeEncoder()
    settings = Settings(data_dir=data_dir, database_url=postgres.url, reload_s=0.5)
    ingest_with(settings, encoder)
    key = _api_key(settings)
    app = create_app(settings, lambda _: encoder, load_in_background=False)
    with serving_in_thread(app) as base, httpx.Client(base_url=base, timeout=HANG_GUARD_S) as http:
        learner = http.post("/v1/learners", json={}).json()["id"]
        question = http.get("/v1/questions").json()["items"][0]["id"]
        healthy = _db_calls(http, learner, question, key)
        assert all(r.status_code in (200, 201) for r in healthy.values()), {k: r.text for k, r in healthy.items()}

        postgres.stop()
        down = _db_calls(http, learner, question, key)
        for name, reply in down.items():
            # Reads may still be answered from the service's short caches, and a graded answer from the
            # attempt journal (stored once the database is back); anything else is a 503 in the error shape.
            if reply.status_code != 503 and name in ("questions", "question", "grade"):
                assert reply.status_code == 200, (name, reply.text)
                continue
            error = _assert_error_shape(reply)
            assert "database" in error["message"], (name, error)
        assert http.get("/healthz").status_code == 200  # the process itself is fine

        postgres.start()
        _until(lambda: http.get("/readyz").status_code, lambda s: s == 200, "readiness after PostgreSQL came back")
        back = _db_calls(http, learner, question, key)
        assert all(r.status_code in (200, 201) for r in back.values()), {k: r.text for k, r in back.items()}
        # every answer graded (200), the one graded while the database was down included, is stored
        _until(lambda: http.get("/readyz").json().get("journal_pending", 0), lambda n: n == 0, "the journal drained")
        graded = [r.json()["attempt_id"] for r in (healthy["grade"], down["grade"], back["grade"])
                  if r.status_code == 200]
        assert _stored(settings, graded) == set(graded)


# --- Redis ----------------------------------------------------------------------------------------------


@pytest.fixture
def redis_server() -> Iterator[PrivateRedis]:
    """A redis-server of this test's own (never the machine's shared one)."""
    try:
        with private_redis() as instance:
            yield instance
    except Unavailable as exc:
        pytest.skip(f"no private Redis: {exc}")


def test_redis_killed_fails_keyed_calls_closed_and_they_recover_when_it_is_back(
        redis_server: PrivateRedis, data_dir: Path) -> None:
    encoder = FakeEncoder()
    settings = Settings(data_dir=data_dir, redis_url=redis_server.url)
    ingest_with(settings, encoder)
    key = _api_key(settings)

    def grade() -> httpx.Response:
        return http.post("/v1/grade", headers={"X-API-Key": key}, json=GRADE)

    app = create_app(settings, lambda _: encoder, load_in_background=False)
    with serving_in_thread(app) as base, httpx.Client(base_url=base, timeout=HANG_GUARD_S) as http:
        assert grade().status_code == 200
        assert http.get("/readyz").status_code == 200

        redis_server.kill()
        refused = _assert_error_shape(grade())  # rate limits fail closed
        assert "Redis" in refused["message"], refused
        ready = _assert_error_shape(http.get("/readyz"))
        assert "Redis" in ready["message"] and len(ready["message"]) < 200, ready
        assert redis_server.url.split("//")[1] not in ready["message"]  # no address leaks to clients
        assert http.post("/v1/learners", json={}).status_code == 201  # calls without a key are not limited by it

        redis_server.start()
        _until(lambda: http.get("/readyz").status_code, lambda s: s == 200, "readiness after Redis came back")
        assert grade().status_code == 200


# --- a full disk during ingestion -----------------------------------------------------------------------


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A folder on a 8 MB file system of its own."""
    try:
        with small_filesystem(8 * 1024) as mount:
            yield mount
    except Unavailable as exc:
        pytest.skip(f"no size-limited file system: {exc}")


def _tutor_ingest(settings: Settings, encoder: FakeEncoder, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`tutor ingest` in process, as an operator runs it, with the fake encoder in place of the model."""
    from app.cli.main import app

    for name in [n for n in os.environ if n.startswith("TUTOR_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr("ingest.embedder.SentenceTransformerEncoder", lambda *_: encoder)
    env = {"TUTOR_DATA_DIR": str(settings.data_dir), "TUTOR_DATABASE_URL": settings.db_url,
           "TUTOR_EXPORT_ONNX": "false"}
    if settings.index_dir is not None:
        env["TUTOR_INDEX_DIR"] = str(settings.index_dir)
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(app, ["ingest"], env=env)
    finally:
        get_settings.cache_clear()


def _active(settings: Settings) -> dict[str, str]:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return {q.id: q.content_hash for q in session.scalars(select(Question).where(Question.status == ACTIVE))}
    finally:
        engine.dispose()


def _on_small_disk(full: str, small_disk: Path, data_dir: Path, tmp_path: Path) -> Settings:
    """Settings whose index folder (or whole data folder: database, documents, index) is on the small disk."""
    if full == "data folder":
        shutil.copytree(data_dir, small_disk / "data")
        return Settings(data_dir=small_disk / "data", reload_s=0.2)
    return Settings(data_dir=data_dir, database_url=f"sqlite:///{tmp_path / 'tutor.db'}",
                    index_dir=small_disk / "index", reload_s=0.2)


def _edit_a_question(settings: Settings) -> None:
    seed = settings.raw_path / "002_1f1c560eb3b82a3f.txt"
    seed.write_text(seed.read_text(encoding="utf-8").replace("Data parallelism + tensor parallelism",
                                                             "Data and tensor parallelism"), encoding="utf-8")


FULL = ["index folder", "data folder"]


@pytest.mark.parametrize("full", FULL)
def test_a_full_disk_fails_ingestion_with_a_message_and_the_live_bank_keeps_serving(
        small_disk: Path, data_dir: Path, tmp_path: Path, full: str) -> None:
    settings = _on_small_disk(full, small_disk, data_dir, tmp_path)
    encoder = FakeEncoder()
    ingest_with(settings, encoder)
    version, rows = _live_version(settings), _active(settings)
    _edit_a_question(settings)

    app = create_app(settings, lambda _: encoder, load_in_background=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/readyz").json()["index_version"] == version[:16]
        filler = fill(small_disk)

        with pytest.raises(Exception) as failed:  # whichever write fails first says why
            ingest_with(settings, encoder)

        message = str(failed.value).lower()  # FAISS: "No space left on device"; SQLite: either of the others
        assert any(m in message for m in ("no space left", "disk is full", "disk i/o error")), repr(failed.value)
        # what was live is still live, and still answers
        assert _live_version(settings) == version and _active(settings) == rows
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["index_version"] == version[:16], ready.text
        assert client.get("/v1/questions", params={"q": "all-reduce"}).status_code == 200
        assert client.post("/v1/ask", json={"text": "what does all-gather do"}).status_code == 200
        assert [p.name for p in settings.index_path.iterdir() if p.name.startswith(".tmp-")] == []

        filler.unlink()
        assert ingest_with(settings, encoder).updated == 1
        new_version = _live_version(settings)
        assert new_version != version and _active(settings) != rows
        _until(lambda: client.get("/readyz").json().get("index_version"), lambda v: v == new_version[:16],
               "the running service picking up the ingestion made after space was freed")


@pytest.mark.parametrize("full", FULL)
def test_tutor_ingest_on_a_full_disk_says_so_and_exits_non_zero(
        small_disk: Path, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full: str) -> None:
    settings = _on_small_disk(full, small_disk, data_dir, tmp_path)
    encoder = FakeEncoder(model_id=model_id_for(settings.model))
    assert _tutor_ingest(settings, encoder, monkeypatch).exit_code == 0
    _edit_a_question(settings)
    fill(small_disk)

    failed = _tutor_ingest(settings, encoder, monkeypatch)

    assert isinstance(failed.exception, SystemExit) and failed.exit_code != 0, repr(failed.exception)
    said = failed.output.lower()
    assert "space" in said or "full" in said, failed.output
    assert "faiss" not in said and "traceback" not in said, failed.output


# --- the demo worker killed mid-run --------------------------------------------------------------------


def _read_events(base: str, run_id: str, key: str, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Read the run's server-sent events through the API until the stream ends (or the guard)."""
    kind = ""
    with httpx.Client(base_url=base, timeout=HANG_GUARD_S, headers={"X-API-Key": key}) as http, \
            http.stream("GET", f"/v1/demos/runs/{run_id}/events") as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))


def test_a_demo_worker_killed_mid_run_ends_the_run_failed_and_new_runs_get_a_quick_503(
        data_dir: Path, tmp_path: Path) -> None:
    encoder = FakeEncoder()
    # a worker silent for 2 s is lost; with no other worker to retry it on, its run fails with the reason
    settings = Settings(data_dir=data_dir, worker_token=TOKEN, demo_queue_url=str(tmp_path / "queue.db"),
                        demo_worker_timeout_s=2.0)
    ingest_with(settings, encoder)
    key = _api_key(settings, ("grade", "author"))
    worker = start_worker(free_port(), TUTOR_WORKER_QUEUE_URL=settings.demo_queue, TUTOR_WORKER_CPU_RANKS="2",
                          TUTOR_WORKER_HEARTBEAT_S="0.5")
    pgid: int | None = None
    app = create_app(settings, lambda _: encoder, load_in_background=False)
    try:
        with serving_in_thread(app) as base, \
                httpx.Client(base_url=base, timeout=HANG_GUARD_S, headers={"X-API-Key": key}) as http:
            _until(lambda: http.get("/v1/demos").json()["available"], bool, "the worker registering")
            started = http.post("/v1/demos/allreduce/runs", json=LONG_RUN)
            assert started.status_code == 202, started.text
            run = started.json()["id"]
            view = _until(lambda: http.get(f"/v1/demos/runs/{run}").json(),
                          lambda v: v["status"] == "running" and v.get("pgid"), "the run starting")
            pgid = view["pgid"]
            events: list[tuple[str, dict[str, Any]]] = []
            reader = threading.Thread(target=_read_events, args=(base, run, key, events), daemon=True)
            reader.start()
            _until(lambda: len(events), lambda n: n >= 1, "the first event of the stream")

            worker.kill()
            worker.wait()
            # while the API finds out, every call about the run answers (never a 500, never a hang)
            for reply in (http.get(f"/v1/demos/runs/{run}"), http.get("/v1/demos")):
                assert reply.status_code == 200, reply.text
            _until(lambda: http.get("/v1/demos").json()["available"], lambda up: not up, "the worker counted lost")
            refused = _assert_error_shape(http.post("/v1/demos/sampler/runs", json={"dataset_size": 9}))
            assert "worker" in refused["message"], refused

            final = _until(lambda: http.get(f"/v1/demos/runs/{run}").json(), lambda v: v["status"] == "failed",
                           "the run of the lost worker failing")
            assert "no heartbeat" in final["error"], final
            reader.join(HANG_GUARD_S)
            assert not reader.is_alive(), "the event stream of the lost run never ended"
            assert events[-1][0] == "done" and events[-1][1]["status"] == "failed", events[-3:]
            _until(lambda: group_members(pgid), lambda left: not left, "the run's processes ending with the worker")
            cancelled = http.delete(f"/v1/demos/runs/{run}")  # cancelling a finished run changes nothing
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "failed", cancelled.text
    finally:
        stop(worker)
        if pgid is not None:
            end_group(pgid)
