"""Group commit: queued writes land together, each caller waits for its commit, failures stay per caller."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.errors import UnavailableError
from app.models import Learner
from app.writes import GroupWriter


@pytest.fixture
def writer(db_url: str) -> Iterator[GroupWriter]:
    engine = make_engine(db_url)
    upgrade(engine)
    w = GroupWriter(make_sessionmaker(make_engine(db_url, pool_size=1)))
    yield w
    w.close()
    engine.dispose()


def _learners(writer: GroupWriter) -> int:
    with transaction(writer.factory) as s:
        return int(s.scalar(select(func.count()).select_from(Learner)) or 0)


def _add(learner_id: str) -> Callable[[Session], None]:
    def write(session: Session) -> None:
        session.execute(insert(Learner), [{"id": learner_id}])

    return write


def test_a_write_is_committed_before_write_returns(writer: GroupWriter) -> None:
    writer.write(_add("l_one"))
    assert _learners(writer) == 1


def test_concurrent_writes_share_transactions(writer: GroupWriter) -> None:
    def slow_first(session: Session) -> None:
        time.sleep(0.2)  # the others queue meanwhile
        session.execute(insert(Learner), [{"id": "l_first"}])

    first = threading.Thread(target=writer.write, args=(slow_first,))
    first.start()
    time.sleep(0.05)
    threads = [threading.Thread(target=writer.write, args=(_add(f"l_{i}"),)) for i in range(20)]
    for t in threads:
        t.start()
    for t in [first, *threads]:
        t.join()
    assert _learners(writer) == 21
    assert writer.transactions < 21  # 21 writes, fewer commits


def test_a_failing_write_fails_alone(writer: GroupWriter) -> None:
    writer.write(_add("l_taken"))
    errors: dict[str, Exception] = {}

    def call(learner_id: str) -> None:
        try:
            writer.write(_add(learner_id))
        except Exception as exc:
            errors[learner_id] = exc

    def hold(session: Session) -> None:
        time.sleep(0.2)

    holder = threading.Thread(target=writer.write, args=(hold,))
    holder.start()
    time.sleep(0.05)
    threads = [threading.Thread(target=call, args=(i,)) for i in ("l_a", "l_taken", "l_b")]
    for t in threads:
        t.start()
    for t in [holder, *threads]:
        t.join()
    assert set(errors) == {"l_taken"}  # the duplicate key fails; the two others in its batch commit
    assert _learners(writer) == 3


def test_full_queue_answers_unavailable(db_url: str) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    writer = GroupWriter(make_sessionmaker(make_engine(db_url, pool_size=1)), max_queue=1)
    release = threading.Event()
    refused: list[Exception] = []

    def block(session: Session) -> None:
        release.wait(5)

    def call() -> None:
        try:
            writer.write(block)
        except UnavailableError as exc:
            refused.append(exc)

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    release.set()
    for t in threads:
        t.join()
    writer.close()
    engine.dispose()
    assert refused and all(isinstance(e, UnavailableError) and e.retry_after for e in refused)


def test_a_database_without_the_schema_raises_to_the_caller(tmp_path: Path) -> None:
    writer = GroupWriter(make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'empty.db'}", pool_size=1)))
    with pytest.raises(Exception, match="no such table"):
        writer.write(_add("l_x"))
    writer.close()
