"""The attempt journal: acknowledged calls reach the database once, whatever stops on the way."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.errors import UnavailableError
from app.grade_api.endpoints import GradedCall
from app.ids import new_id
from app.keys.service import create_key, usage
from app.models import Attempt, utcnow
from app.serving.journal import REJECTED, SEGMENT_PREFIX, AttemptJournal
from app.serving.writes import GroupWriter

ROOT = Path(__file__).resolve().parents[3]


class Store:
    """A migrated database with one API key, and journals over one folder that the test closes."""

    def __init__(self, db_url: str, folder: Path) -> None:
        self.db_url, self.folder = db_url, folder
        self.engine = make_engine(db_url)
        upgrade(self.engine)
        self.factory = make_sessionmaker(self.engine)
        with transaction(self.factory) as s:
            key, _ = create_key(s, name="journal", scopes=["grade"])
            self.key_id = key.id
        self.writers: list[GroupWriter] = []
        self.journals: list[AttemptJournal] = []

    def journal(self, **options: Any) -> AttemptJournal:
        writer = GroupWriter(make_sessionmaker(make_engine(self.db_url, pool_size=1)), timeout_s=5)
        self.writers.append(writer)
        journal = AttemptJournal(self.folder, writer, GradedCall, **options)
        self.journals.append(journal)
        return journal

    def call(self, answers: int = 1, key_id: str | None = None) -> GradedCall:
        rows = [_row(key_id or self.key_id, f"answer {i}") for i in range(answers)]
        return GradedCall(key_id or self.key_id, "grade" if answers == 1 else "grade/batch", answers, rows)

    def attempts(self) -> int:
        with transaction(self.factory) as s:
            return int(s.scalar(select(func.count()).select_from(Attempt)) or 0)

    def usage(self) -> dict[str, tuple[int, int]]:
        with transaction(self.factory) as s:
            return {r.endpoint: (r.calls, r.items) for r in usage(s, self.key_id)}

    def segments(self) -> list[Path]:
        return sorted(self.folder.glob(f"{SEGMENT_PREFIX}*"))

    def close(self) -> None:
        for journal in self.journals:
            journal.close(timeout_s=5)
        for writer in self.writers:
            writer.close()
        self.engine.dispose()


def _row(key_id: str, answer: str) -> dict[str, Any]:
    return {
        "id": new_id("a"), "question_id": None, "rubric_id": None, "api_key_id": key_id, "answer": answer,
        "choice": None, "verdict": "partial", "score": 0.5, "confidence": 0.7,
        "result": {"verdict": "partial", "score": 0.5, "feedback": "half of it"}, "grader_version": "test",
        "model_id": "fake", "created_at": utcnow(),
    }


def _die(journal: AttemptJournal) -> None:
    """As if its process ended now: the segments stay, their locks go, nothing more is moved."""
    for segment in [*journal._waiting, *([journal._current] if journal._current else [])]:
        segment.release()
    journal.close = lambda timeout_s=0: None  # type: ignore[method-assign]


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Iterator[Store]:
    s = Store(db_url, tmp_path / "journal")
    yield s
    s.close()


def test_appended_calls_are_stored_with_their_usage_and_the_segment_goes(store: Store) -> None:
    journal = store.journal()
    calls = [store.call(), store.call(), store.call(answers=3)]
    for call in calls:
        journal.append(call)
    assert journal.pending == 3 and len(store.segments()) == 1 and store.attempts() == 0
    assert journal.flush()
    assert store.attempts() == 5
    assert store.usage() == {"grade": (2, 2), "grade/batch": (1, 3)}
    assert journal.pending == 0 and journal.moved == 3 and store.segments() == []
    with transaction(store.factory) as s:
        row = s.get(Attempt, calls[2].attempts[1]["id"])
        assert row is not None and row.result["feedback"] == "half of it" and row.answer == "answer 1"


def test_the_mover_stores_without_being_asked(store: Store) -> None:
    journal = store.journal(interval_s=0.01)
    journal.start()
    journal.append(store.call())
    deadline = time.monotonic() + 10
    while journal.moved < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert journal.moved == 1 and store.attempts() == 1


def test_what_a_dead_process_left_is_stored_once_even_if_part_was_stored(store: Store) -> None:
    first = store.journal()
    calls = [store.call() for _ in range(4)]
    for call in calls[:2]:
        first.append(call)
    assert first.flush()  # these two are stored and their segment deleted...
    for call in calls:  # ...then the process journals all four again, and dies before moving them
        first.append(call)
    (segment,) = store.segments()
    leftover = segment.read_bytes()
    _die(first)

    second = store.journal()
    assert second.recover() == 4 and second.pending == 4
    assert second.flush()
    assert store.attempts() == 4  # the two already stored are skipped, not inserted or counted again
    assert store.usage() == {"grade": (4, 4)} and second.rejected == 0
    assert store.segments() == []
    with transaction(store.factory) as s:  # read back from the file: the time it was graded, to the microsecond
        graded = calls[3].attempts[0]
        row = s.get(Attempt, graded["id"])
        assert row is not None and row.result == graded["result"] and row.score == graded["score"]
        assert row.created_at.replace(tzinfo=None) == graded["created_at"].astimezone(UTC).replace(tzinfo=None)
    segment.write_bytes(leftover)  # a third start finds the same file again: nothing changes
    third = store.journal()
    assert third.recover() == 4 and third.flush()
    assert store.attempts() == 4 and store.usage() == {"grade": (4, 4)}


def test_a_line_cut_short_by_a_crash_is_skipped_and_the_rest_stored(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    dead = store.journal()
    dead.append(store.call())
    dead.append(store.call())
    _die(dead)
    (segment,) = store.segments()
    whole = segment.read_bytes()
    segment.write_bytes(whole + whole.splitlines(keepends=True)[0][:40])  # a third write, cut off

    journal = store.journal()
    assert journal.recover() == 2
    assert journal.flush() and store.attempts() == 2
    assert "cut short" in caplog.text


def test_a_segment_a_live_process_writes_is_not_taken(store: Store) -> None:
    live = store.journal()
    live.append(store.call())
    other = store.journal()
    assert other.recover() == 0  # its lock is held
    assert live.flush() and store.attempts() == 1


def test_a_database_that_goes_away_keeps_the_calls_until_it_is_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = store.journal(max_pending=3)
    writer = store.writers[-1]
    real = writer.write

    def down(write: Any) -> None:
        raise OperationalError("INSERT", {}, Exception("could not connect to server"))

    monkeypatch.setattr(writer, "write", down)
    for _ in range(3):
        journal.append(store.call())
    assert not journal.flush()
    assert journal.pending == 3 and len(store.segments()) == 1
    with pytest.raises(UnavailableError) as full:  # bounded: the fourth is refused with Retry-After
        journal.append(store.call())
    assert full.value.retry_after == 5
    monkeypatch.setattr(writer, "write", real)
    assert journal.flush()
    assert store.attempts() == 3 and journal.pending == 0 and store.segments() == []


def test_a_call_the_database_refuses_goes_to_the_rejected_file_and_the_others_are_stored(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    journal = store.journal()
    journal.append(store.call())
    journal.append(store.call(key_id="k_nobody"))  # no such key: its usage row breaks a foreign key
    journal.append(store.call())
    assert journal.flush()
    assert store.attempts() == 2 and store.usage() == {"grade": (2, 2)}
    assert journal.rejected == 1 and journal.pending == 0
    (line,) = (store.folder / REJECTED).read_text().splitlines()
    assert '"key_id":"k_nobody"' in line
    assert "refused" in caplog.text


def test_settle_stores_a_pending_attempt_before_a_read(store: Store) -> None:
    journal = store.journal()
    call = store.call()
    journal.append(call)
    journal.settle(["a_other"])
    assert store.attempts() == 0
    journal.settle([call.attempts[0]["id"]])
    assert store.attempts() == 1


def test_a_killed_server_loses_no_acknowledged_grade(tmp_path: Path) -> None:
    """SIGKILL right after acknowledged grades: the next start stores every one of them."""
    engine_url = f"sqlite:///{tmp_path / 'tutor.db'}"
    folder = tmp_path / "journal"
    child = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.app.serving.test_journal import Store
        store = Store({engine_url!r}, __import__("pathlib").Path({str(folder)!r}))
        journal = store.journal(interval_s=3600)  # the mover never runs before the kill
        journal.start()
        ids = []
        for _ in range(25):
            call = store.call()
            journal.append(call)  # acknowledged from here on
            ids.append(call.attempts[0]["id"])
        print(" ".join(ids), store.key_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    *ids, key_id = proc.stdout.split()
    engine = make_engine(engine_url)
    factory = make_sessionmaker(engine)
    with transaction(factory) as s:
        assert s.scalar(select(func.count()).select_from(Attempt)) == 0
    writer = GroupWriter(make_sessionmaker(make_engine(engine_url, pool_size=1)))
    journal = AttemptJournal(folder, writer, GradedCall)
    try:
        assert journal.recover() == 25 and journal.flush()
        with transaction(factory) as s:
            assert set(s.scalars(select(Attempt.id))) == set(ids)
            assert [(r.endpoint, r.calls) for r in usage(s, key_id)] == [("grade", 25)]
    finally:
        journal.close()
        writer.close()
        engine.dispose()


def test_segments_are_locked_by_their_writer(store: Store) -> None:
    journal = store.journal()
    journal.append(store.call())
    (segment,) = store.segments()
    fd = os.open(segment, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_the_mover_retries_a_database_that_was_down(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = store.journal(interval_s=0.01)
    writer = store.writers[-1]
    real, tries = writer.write, []

    def down(write: Any) -> None:
        tries.append(1)
        raise OperationalError("INSERT", {}, Exception("the database is locked"))

    monkeypatch.setattr(writer, "write", down)
    journal.start()
    journal.append(store.call())
    deadline = time.monotonic() + 10
    while len(tries) < 2 and time.monotonic() < deadline:  # it tried, and tried again unasked
        time.sleep(0.01)
    assert len(tries) >= 2 and journal.pending == 1
    monkeypatch.setattr(writer, "write", real)
    while journal.pending and time.monotonic() < deadline + 10:
        time.sleep(0.01)
    assert journal.pending == 0 and store.attempts() == 1


def test_the_app_stores_its_journal_when_it_stops(settings: Any, fake_encoder: Any) -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.app.grade_api.test_grade_api import INLINE
    from tests.conftest import ingest_with

    ingest_with(settings, fake_encoder)
    app = create_app(settings.model_copy(update={"journal_interval_ms": 3_600_000}), lambda _: fake_encoder,
                     load_in_background=False)
    with TestClient(app) as client:
        engine = make_engine(settings.db_url)
        with transaction(make_sessionmaker(engine)) as s:
            _, secret = create_key(s, name="t", scopes=["grade"])
        res = client.post("/v1/grade", json={**INLINE, "answer": "every rank gets the sum"},
                          headers={"X-API-Key": secret})
        assert res.status_code == 200, res.text
        assert client.get("/readyz").json()["journal_pending"] == 1  # answered, not stored yet
    with transaction(make_sessionmaker(engine)) as s:
        assert s.get(Attempt, res.json()["attempt_id"]) is not None
    engine.dispose()


def test_a_journal_that_cannot_be_written_refuses_the_call_and_keeps_the_others(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from app.serving import journal as journal_module

    journal = store.journal()
    journal.append(store.call())
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_module.os, "write", full)
    with pytest.raises(UnavailableError, match="No space left") as refused:
        journal.append(store.call())
    assert refused.value.retry_after == 5
    monkeypatch.setattr(journal_module.os, "write", lambda fd, data: real_write(fd, data[:10]))
    with pytest.raises(UnavailableError, match="10 of"):  # a line cut short: not acknowledged either
        journal.append(store.call())
    monkeypatch.setattr(journal_module.os, "write", real_write)
    journal.append(store.call())
    assert journal.pending == 2 and journal.flush()
    assert store.attempts() == 2 and store.usage() == {"grade": (2, 2)}
