"""Savepoints (`session.begin_nested()`) commit with their session, never on their own, on both databases;
on SQLite a savepoint waits for the write lock instead of failing."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.db import make_engine, make_sessionmaker, transaction


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine made the way the app makes one, with a one-column table."""
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE items (id INTEGER PRIMARY KEY)"))
    yield engine
    engine.dispose()


def _ids(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return [int(i) for i in conn.execute(text("SELECT id FROM items ORDER BY id")).scalars()]


def _insert_in_savepoint(session: Session, item: int) -> None:
    session.execute(text("SELECT count(*) FROM items")).scalar()  # reads outside any transaction on SQLite
    session.commit()
    with session.begin_nested():
        session.execute(text("INSERT INTO items (id) VALUES (:id)"), {"id": item})


def test_a_released_savepoint_is_not_committed(engine: Engine) -> None:
    factory = make_sessionmaker(engine)
    with factory() as session:
        _insert_in_savepoint(session, 1)
        assert _ids(engine) == []  # another connection does not see it yet
        session.rollback()
    assert _ids(engine) == []
    with pytest.raises(RuntimeError), transaction(factory) as session:
        _insert_in_savepoint(session, 2)
        raise RuntimeError("the request fails after its savepoint")
    assert _ids(engine) == []
    with transaction(factory) as session:
        _insert_in_savepoint(session, 3)
    assert _ids(engine) == [3]


def test_a_savepoint_that_reads_then_writes_waits_for_the_lock(engine: Engine, db_url: str) -> None:
    """Another connection holds SQLite's write lock for a moment: a savepoint that reads, then
    writes, waits for it (busy timeout) instead of failing with 'database is locked'."""
    if not db_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    other = sqlite3.connect(db_url.split("///", 1)[1], isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO items (id) VALUES (10)")

    def commit_later() -> None:
        time.sleep(0.5)
        other.execute("COMMIT")

    holder = threading.Thread(target=commit_later)
    holder.start()
    try:
        with transaction(make_sessionmaker(engine)) as session:
            session.commit()
            with session.begin_nested():
                seen = session.execute(text("SELECT count(*) FROM items")).scalar()
                session.execute(text("INSERT INTO items (id) VALUES (:id)"), {"id": 11 + int(seen or 0)})
    finally:
        holder.join()
        other.close()
    assert _ids(engine) == [10, 12]
