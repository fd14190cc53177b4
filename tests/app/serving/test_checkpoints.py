"""A serving process checkpoints SQLite's write-ahead log on a housekeeping thread, not in commits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert

from app.config import Settings
from app.db import SERVING_AUTOCHECKPOINT_PAGES, checkpoint_wal, make_engine, upgrade
from app.models import Learner
from app.serving import runtime as runtime_module
from app.serving.runtime import Runtime


def _autocheckpoint(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one())


def _write(engine: Engine, rows: int) -> None:
    for i in range(rows):  # one transaction each: each adds frames to the log
        with engine.begin() as conn:
            conn.execute(insert(Learner), [{"id": f"l_{time.perf_counter_ns()}_{i}"}])


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'tutor.db'}")


@pytest.fixture
def serving(sqlite_settings: Settings) -> Iterator[Runtime]:
    runtime = Runtime.create(sqlite_settings, background_checkpoints=True)
    runtime.migrate()
    try:
        yield runtime
    finally:
        runtime.close()


def test_a_serving_runtimes_commits_checkpoint_only_past_the_backstop(serving: Runtime,
                                                                      sqlite_settings: Settings) -> None:
    assert _autocheckpoint(serving.engine) == SERVING_AUTOCHECKPOINT_PAGES
    assert _autocheckpoint(serving.writer.factory.kw["bind"]) == SERVING_AUTOCHECKPOINT_PAGES
    other = Runtime.create(sqlite_settings)  # the command line's: SQLite's own default
    try:
        assert _autocheckpoint(other.engine) == 1000
        assert _autocheckpoint(other.writer.factory.kw["bind"]) == 1000
    finally:
        other.close()


def test_checkpoint_wal_copies_the_whole_log_into_the_database(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'tutor.db'}", wal_autocheckpoint=SERVING_AUTOCHECKPOINT_PAGES)
    upgrade(engine)
    _write(engine, 20)
    first = checkpoint_wal(engine)
    assert first is not None
    busy, frames, copied = first
    assert busy == 0 and frames > 20 and copied == frames  # nobody else reads: all of it
    engine.dispose()


def test_checkpoint_wal_checkpoints_sqlite_and_leaves_other_databases_alone(db_url: str) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    _write(engine, 2)
    result = checkpoint_wal(engine)
    assert (result is None) == (engine.dialect.name != "sqlite")
    engine.dispose()


def test_watch_checkpoints_a_serving_runtime_on_its_own_thread(serving: Runtime,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    results: list[tuple[int, int, int] | None] = []
    threads: list[str] = []

    def recorded(engine: Engine) -> tuple[int, int, int] | None:
        threads.append(threading.current_thread().name)
        out = checkpoint_wal(engine)
        results.append(out)
        return out

    monkeypatch.setattr(runtime_module, "checkpoint_wal", recorded)
    monkeypatch.setattr(runtime_module, "CHECKPOINT_S", 0.01)
    serving.watch(0, trim_s=0)
    _write(serving.engine, 10)
    deadline = time.monotonic() + 30  # a bound for a stuck thread, not a timing claim
    while not any(r is not None and r[1] > 0 and r[2] == r[1] for r in results) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(r is not None and r[1] > 0 and r[2] == r[1] for r in results)
    assert set(threads) == {"wal-checkpoint"}


def _tasks(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the housekeeping tasks `watch` starts (recorded, not started)."""
    names: list[str] = []
    monkeypatch.setattr(runtime, "_every", lambda period_s, task, name: names.append(name))
    runtime.watch(0, trim_s=0)
    return names


def test_only_a_serving_runtime_checkpoints_in_the_background(serving: Runtime, sqlite_settings: Settings,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert _tasks(serving, monkeypatch) == ["wal-checkpoint"]
    other = Runtime.create(sqlite_settings)
    try:
        assert _tasks(other, monkeypatch) == []
    finally:
        other.close()
