"""Group commit: queued writes land together, each caller waits for its commit, failures stay per caller."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import Connection, func, insert, select
from sqlalchemy.orm import Session

from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.errors import UnavailableError
from app.models import Learner
from app.serving.writes import GroupWriter


@contextmanager
def _writer(db_url: str, **options: Any) -> Iterator[GroupWriter]:
    """A writer on its own one-connection engine over an upgraded database, closed afterwards."""
    engine = make_engine(db_url)
    upgrade(engine)
    w = GroupWriter(make_sessionmaker(make_engine(db_url, pool_size=1)), **options)
    try:
        yield w
    finally:
        w.close()
        engine.dispose()


@pytest.fixture
def writer(db_url: str) -> Iterator[GroupWriter]:
    with _writer(db_url) as w:
        yield w


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
    release = threading.Event()
    refused: list[Exception] = []

    def block(session: Session) -> None:
        release.wait(5)

    with _writer(db_url, max_queue=1) as writer:

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
    assert refused and all(isinstance(e, UnavailableError) and e.retry_after for e in refused)


def test_a_database_without_the_schema_raises_to_the_caller(tmp_path: Path) -> None:
    writer = GroupWriter(make_sessionmaker(make_engine(f"sqlite:///{tmp_path / 'empty.db'}", pool_size=1)))
    with pytest.raises(Exception, match="no such table"):
        writer.write(_add("l_x"))
    writer.close()


class AddLearners:
    """A combinable write: runs of these are applied with one multi-row insert."""

    applied: ClassVar[list[int]] = []  # sizes of apply_all calls

    def __init__(self, *ids: str) -> None:
        self.ids = ids

    def __call__(self, session: Session) -> None:
        self.apply_all(session.connection(), [self])

    @classmethod
    def apply_all(cls, connection: Connection, writes: list[AddLearners]) -> None:
        cls.applied.append(len(writes))
        connection.execute(insert(Learner), [{"id": i} for w in writes for i in w.ids])


def _queued_behind_a_slow_write(writer: GroupWriter, writes: list[Callable[[Session], None]]) -> dict[int, Exception]:
    """Submit `writes` while a slow write holds the writer, so they form one group; errors by position."""
    started = threading.Event()

    def slow(session: Session) -> None:
        started.set()
        time.sleep(0.2)

    holder = writer.submit(slow)
    started.wait(5)
    futures = [writer.submit(w) for w in writes]
    holder.result(timeout=10)
    errors = {}
    for i, f in enumerate(futures):
        try:
            f.result(timeout=10)
        except Exception as exc:
            errors[i] = exc
    return errors


def test_combinable_writes_in_a_group_are_applied_together(writer: GroupWriter) -> None:
    AddLearners.applied = []
    plain = _add("l_plain")
    errors = _queued_behind_a_slow_write(writer, [AddLearners("l_1"), AddLearners("l_2", "l_3"), plain,
                                                  AddLearners("l_4")])
    assert errors == {}
    assert _learners(writer) == 5
    assert AddLearners.applied == [2, 1]  # one call per run of combinable writes, around the plain one


def test_a_group_of_combinable_writes_commits_on_a_core_connection(writer: GroupWriter,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    factory = writer.factory

    def no_session() -> Session:
        raise AssertionError("the writer opened an ORM session for combinable writes only")

    monkeypatch.setattr(writer, "factory", no_session)
    AddLearners.applied = []
    writer.write(AddLearners("l_core_1", "l_core_2"))
    assert AddLearners.applied == [1]
    monkeypatch.setattr(writer, "factory", factory)
    assert _learners(writer) == 2


def test_a_failing_combinable_write_fails_alone(writer: GroupWriter) -> None:
    writer.write(_add("l_taken"))
    AddLearners.applied = []
    errors = _queued_behind_a_slow_write(writer, [AddLearners("l_a"), AddLearners("l_taken"), AddLearners("l_b")])
    assert list(errors) == [1]
    assert _learners(writer) == 3  # l_taken, l_a, l_b: the group failed, then each write went alone


def test_awrite_waits_for_the_commit_on_the_event_loop(writer: GroupWriter) -> None:
    import asyncio

    asyncio.run(writer.awrite(_add("l_async")))
    assert _learners(writer) == 1


def test_awrite_times_out_with_unavailable_and_the_write_still_lands(db_url: str) -> None:
    import asyncio

    release = threading.Event()

    def slow(session: Session) -> None:
        release.wait(5)
        session.execute(insert(Learner), [{"id": "l_late"}])

    with _writer(db_url, timeout_s=0.05) as writer:
        with pytest.raises(UnavailableError, match="did not answer in time"):
            asyncio.run(writer.awrite(slow))
        release.set()
        writer.close()  # waits for the queued write
        assert _learners(writer) == 1  # the caller gave up waiting; the writer did not drop the write
