"""The attempt journal: graded answers are acknowledged once journaled, and reach the database in groups.

Storing each graded answer in its own transaction before answering was the largest cost of a lone
`POST /v1/grade` after the encode itself (`bench/bench_floor.py --commit`: about 0.5-1.1 ms of a
4-6.6 ms request on two cores, though SQLite's commit alone takes about 0.2 ms). So a request that
the encoder's worker finishes by itself (no other request to batch it with) appends its call (its
attempts and its usage count) as one JSON line to a segment file in `<data dir>/journal/` with one
`write`, and answers. A mover thread takes what was appended every `interval_s`, writes it in one
transaction through the group writer, and deletes the segment. Under load the group writer
already commits several calls at once, and those calls still wait for it (app/grade_api/endpoints.py).

Durability: a line is in the operating system's page cache when `append` returns, so a crash of
the process (even SIGKILL) loses nothing acknowledged; a power cut may lose the last lines, as
SQLite in WAL mode with synchronous=NORMAL may lose its last commits. The next process to start on
the same data folder moves what an earlier one left (`recover`).

Exactly once: a segment is locked (flock) by the process that writes it, so no other process
recovers it while it lives. Every move first asks which of its calls' attempts are already stored,
and skips those: a process may die between a commit and deleting its segment, and a commit may
land after the writer's timeout has already made the mover keep the segment for a retry.

A database that goes away: the mover keeps the calls and retries with backoff, and grading goes on
answering until `max_pending` calls wait; then `append` answers 503 with Retry-After. A call the
database refuses for good (not a lost connection) is logged and kept in `rejected.jsonl`, and
does not hold up the others. That file holds learners' answers: it is readable by the service's
user only (0600), and the log line names the error's class, never the statement or its values.

Reads that must see an attempt at once (`settle`) move what is pending first.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import pydantic_core
from sqlalchemy import Connection, select
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session

from app.errors import UnavailableError, db_error_summary
from app.models import Attempt
from app.serving.writes import GroupWriter

log = logging.getLogger(__name__)

SEGMENT_PREFIX = "attempts-"
SEGMENT_SUFFIX = ".jsonl"
REJECTED = "rejected.jsonl"
MAX_BACKOFF_S = 2.0


class JournaledCall(Protocol):
    """What the journal stores: a grading call's attempts and its usage count (`GradedCall`)."""

    @property
    def key_id(self) -> str: ...

    @property
    def endpoint(self) -> str: ...

    @property
    def items(self) -> int: ...

    @property
    def attempts(self) -> list[dict[str, Any]]: ...


class CallKind(Protocol):
    """The class of the journaled calls: builds one from its fields, and writes many at once."""

    def __call__(self, key_id: str, endpoint: str, items: int, attempts: list[dict[str, Any]]) -> JournaledCall: ...

    def apply_all(self, connection: Connection, calls: list[Any]) -> None: ...


def _line(call: JournaledCall) -> bytes:
    """One call as a JSON line, by pydantic-core's serializer (a 2.3 KB line in 6.8 µs against
    24 µs with `json.dumps`); datetimes as ISO 8601 (UTC as `Z`), anything else unknown refused."""
    body = {"key_id": call.key_id, "endpoint": call.endpoint, "items": call.items, "attempts": call.attempts}
    return pydantic_core.to_json(body, inf_nan_mode="null") + b"\n"


def _parse(kind: CallKind, line: bytes) -> JournaledCall:
    body = json.loads(line)
    attempts = body["attempts"]
    for row in attempts:
        if isinstance(row.get("created_at"), str):
            row["created_at"] = datetime.fromisoformat(row["created_at"])
    return kind(body["key_id"], body["endpoint"], int(body["items"]), attempts)


def _transient(exc: BaseException) -> bool:
    """A failure that retrying later may cure: the database unreachable, busy or timed out."""
    if isinstance(exc, (UnavailableError, OperationalError, InterfaceError, TimeoutError, ConnectionError)):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


@dataclass(eq=False)
class _Segment:
    """One journal file: its calls are moved together, then it is deleted."""

    path: Path
    fd: int | None
    calls: list[JournaledCall] = field(default_factory=list)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # also drops its lock
            self.fd = None


class _Move:
    """One group of the mover: the calls whose attempts are not stored yet, written together.

    Combinable (app/serving/writes.py): the group writer commits it on a Core connection, with whatever
    else is queued."""

    def __init__(self, kind: CallKind, calls: list[JournaledCall]) -> None:
        self.kind, self.calls = kind, calls

    def __call__(self, session: Session) -> None:
        self.apply_all(session.connection(), [self])

    @classmethod
    def apply_all(cls, connection: Connection, moves: list[_Move]) -> None:
        for move in moves:
            stored = _stored_ids(connection, [call.attempts[0]["id"] for call in move.calls])
            fresh = [call for call in move.calls if call.attempts[0]["id"] not in stored]
            if fresh:
                move.kind.apply_all(connection, fresh)


def _stored_ids(connection: Connection, ids: list[str]) -> set[str]:
    out: set[str] = set()
    for start in range(0, len(ids), 500):  # well under every database's bound on parameters
        chunk = ids[start:start + 500]
        out.update(connection.scalars(select(Attempt.id).where(Attempt.id.in_(chunk))))
    return out


class AttemptJournal:
    """Append graded calls durably at once; a thread moves them into the database in groups."""

    def __init__(self, folder: Path, writer: GroupWriter, kind: CallKind, *, interval_s: float = 0.05,
                 max_pending: int = 20_000) -> None:
        self.folder = folder
        self.writer = writer
        self.kind = kind
        self.interval_s = interval_s
        self.max_pending = max_pending
        self.moved = 0  # calls moved so far (tests, benchmarks)
        self.rejected = 0  # calls the database refused for good
        self._lock = threading.Lock()  # appends, the current segment, the pending ids
        self._move_lock = threading.Lock()  # one move at a time (the mover, or a caller's `flush`)
        self._current: _Segment | None = None
        self._waiting: list[_Segment] = []  # closed segments not moved yet, oldest first
        self._pending = 0
        self._pending_ids: set[str] = set()
        self._seq = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        folder.mkdir(parents=True, exist_ok=True)

    # -- appending (request path) --

    def append(self, call: JournaledCall) -> None:
        """Journal one call with at least one attempt; durable against a crash of the process when it returns.

        Raises UnavailableError when `max_pending` calls already wait for the database.
        """
        if not call.attempts:
            raise ValueError("the journal takes calls with attempts (their ids make moving exactly-once)")
        line = _line(call)
        with self._lock:
            if self._pending >= self.max_pending:
                raise UnavailableError("graded answers are waiting for the database; retry in a moment",
                                       retry_after=5)
            try:
                segment = self._current or self._open()
                written = os.write(segment.fd, line)  # type: ignore[arg-type]
            except OSError as exc:  # a full disk, say: this call is not acknowledged
                written, reason = -1, exc.strerror or type(exc).__name__
            else:
                reason = f"{written} of {len(line)} bytes written"
            if written != len(line):
                self._seal()  # a partial line can only be the segment's last: `recover` skips it
                raise UnavailableError(f"the attempt journal cannot be written ({reason}); retry in a moment",
                                       retry_after=5)
            segment.calls.append(call)
            self._pending += 1
            self._pending_ids.update(row["id"] for row in call.attempts)

    def _open(self) -> _Segment:
        self._seq += 1
        path = self.folder / f"{SEGMENT_PREFIX}{time.time_ns():020d}-{os.getpid()}-{self._seq:06d}{SEGMENT_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # this process's while it lives: `recover` elsewhere leaves it
        self._current = _Segment(path, fd)
        self._wake.set()  # the mover gathers for interval_s, then moves this segment
        return self._current

    def _seal(self) -> None:
        """End the current segment (under `_lock`): the next append starts another."""
        if self._current is not None:
            self._waiting.append(self._current)
            self._current = None

    @property
    def pending(self) -> int:
        """Calls acknowledged and not in the database yet."""
        return self._pending

    # -- moving (the mover thread, `flush`, `settle`, `recover`, `close`) --

    def start(self) -> None:
        """Start the mover thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="attempt-journal", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        delay = self.interval_s
        while True:
            self._wake.wait()  # idle until a segment is opened (or found, or the journal closes)
            if self._stop.wait(delay):  # meanwhile more calls join the segment; close() moves the rest
                return
            self._wake.clear()  # before the move: a segment opened during it wakes the next round
            try:
                done = self.flush()
            except Exception:  # the mover must outlive any one failure
                log.exception("the attempt journal's mover failed")
                done = False
            if not done:
                self._wake.set()  # try again after the backoff
            delay = self.interval_s if done else min(MAX_BACKOFF_S, max(delay * 2, 0.1))

    def flush(self) -> bool:
        """Move every sealed and current segment's calls now; True when all of it is in the database."""
        with self._move_lock:
            with self._lock:
                self._seal()
                segments = list(self._waiting)
            return all(self._move_segment(segment) for segment in segments)  # oldest first; stops at a failure

    def _move_segment(self, segment: _Segment) -> bool:
        try:
            self.writer.write(_Move(self.kind, segment.calls))
        except Exception as exc:
            if _transient(exc):
                log.warning("attempt journal: %d calls wait for the database: %s", len(segment.calls),
                            db_error_summary(exc))
                return False
            if not self._move_one_by_one(segment):
                return False
        self._done(segment)
        return True

    def _move_one_by_one(self, segment: _Segment) -> bool:
        """After a refused group: each call alone; one refused for good goes to the rejected file.

        The calls stored here stay in the segment until it is done: a later try skips them."""
        for call in list(segment.calls):
            try:
                self.writer.write(_Move(self.kind, [call]))
            except Exception as exc:
                if _transient(exc):
                    return False
                self._reject(call, exc)
                self._forget(segment, [call])
        return True

    def _reject(self, call: JournaledCall, exc: Exception) -> None:
        log.error("attempt journal: the database refused a call of key %s (%s); kept in %s",
                  call.key_id, db_error_summary(exc), self.folder / REJECTED)
        fd = os.open(self.folder / REJECTED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with open(fd, "ab") as f:
            os.fchmod(fd, 0o600)  # also a file made readable to others before (by hand, or an older version)
            f.write(_line(call))
        self.rejected += 1

    def _forget(self, segment: _Segment, calls: list[JournaledCall]) -> None:
        """These calls of the segment are no longer pending (stored, or rejected)."""
        with self._lock:
            for call in calls:
                segment.calls.remove(call)
                self._pending -= 1
                self._pending_ids.difference_update(row["id"] for row in call.attempts)

    def _done(self, segment: _Segment) -> None:
        self.moved += len(segment.calls)
        self._forget(segment, list(segment.calls))
        with self._lock:
            self._waiting.remove(segment)
        segment.path.unlink(missing_ok=True)
        segment.release()

    def settle(self, ids: Iterable[str]) -> None:
        """Before a read that must see these attempts: move what is pending if any of them is."""
        if self._pending_ids and any(i in self._pending_ids for i in ids):
            self.flush()

    def recover(self) -> int:
        """Take over the segments that ended processes left here (this one's own excluded); the
        mover moves them, skipping calls already stored. Returns how many calls were found."""
        found, adopted = 0, False
        own = {s.path for s in self._waiting} | ({self._current.path} if self._current else set())
        for path in sorted(self.folder.glob(f"{SEGMENT_PREFIX}*{SEGMENT_SUFFIX}")):
            if path in own:
                continue
            segment = self._adopt(path)
            if segment is None:
                continue
            adopted = True
            with self._lock:
                self._waiting.append(segment)
                self._pending += len(segment.calls)
                self._pending_ids.update(row["id"] for call in segment.calls for row in call.attempts)
            found += len(segment.calls)
        if found:
            log.warning("attempt journal: %d graded calls left by an earlier process will be stored", found)
        if adopted:
            self._wake.set()
        return found

    def _adopt(self, path: Path) -> _Segment | None:
        """A segment whose writer is gone (its lock is free), read; None if a live process holds it."""
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        with open(fd, "rb", closefd=False) as f:
            data = f.read()
        calls = []
        lines = data.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                calls.append(_parse(self.kind, line))
            except (ValueError, KeyError, TypeError) as exc:
                # a line cut short by a crash during its write was never acknowledged
                where = "its last line, cut short" if number >= len(lines) - 1 else f"line {number}"
                log.warning("attempt journal: skipped %s of %s (%s)", where, path.name, exc)
        return _Segment(path, fd, calls)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the mover after a last move; what cannot be moved now stays on disk for the next start."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        try:
            if not self.flush():
                log.warning("attempt journal: %d graded calls stay in %s until the next start", self._pending,
                            self.folder)
        except Exception:
            log.exception("attempt journal: the last move failed; the calls stay in %s", self.folder)
        with self._lock:
            for segment in [*self._waiting, *([self._current] if self._current else [])]:
                segment.release()
