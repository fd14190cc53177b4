"""Coalescing: concurrent callers' jobs run in groups on worker threads, or at once when a worker is idle.

The encoder's micro-batcher and the API's group-commit writer are both this: a bounded queue,
workers that each take what is waiting as one group, and a fast path for a caller that finds
nothing queued and a worker's place free (it runs its own job on its thread, with no hand-over).
The writer has one worker (one connection); the encoder one per core it may use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from queue import Empty, Full, Queue
from typing import Generic, TypeVar

J = TypeVar("J")

# While fewer jobs than this per worker are queued, a worker takes only its share of them.
SHARE_BELOW = 8


class Coalescer(Generic[J]):
    """Subclasses implement `_process(jobs)` (and `_size(job)` when jobs differ in size)."""

    def __init__(
        self, name: str, *, max_group: int, max_queue: int, max_wait_s: float = 0.0, workers: int = 1
    ) -> None:
        if workers < 1:
            raise ValueError("a coalescer needs at least one worker")
        self.max_group = max_group
        self.max_wait_s = max_wait_s
        self.workers = workers
        self._queue: Queue[J | None] = Queue(maxsize=max_queue)
        # One place per worker, held while a group (or an idle caller's own job) runs.
        self._busy = threading.BoundedSemaphore(workers)
        self._threads = [
            threading.Thread(target=self._loop, name=name if workers == 1 else f"{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        self._start_lock = threading.Lock()

    @contextmanager
    def _idle(self) -> Iterator[bool]:
        """True (holding a worker's place) when nothing is queued and a place is free: run your job yourself."""
        if self._queue.empty() and self._busy.acquire(blocking=False):
            try:
                yield True
            finally:
                self._busy.release()
        else:
            yield False

    def _enqueue(self, job: J, full: Exception) -> None:
        """Queue a job for the next group; raise `full` when the queue is at its bound."""
        self._ensure_started()
        try:
            self._queue.put_nowait(job)
        except Full as exc:
            raise full from exc

    def _ensure_started(self) -> None:
        if self._threads[0].ident is None:
            with self._start_lock:
                if self._threads[0].ident is None:
                    for thread in self._threads:
                        thread.start()

    def _size(self, job: J) -> int:
        return 1

    def _process(self, jobs: list[J]) -> None:
        raise NotImplementedError

    def _limit(self) -> int:
        """How large the next group may grow: max_group, or this worker's share of a short queue.

        Workers finish their groups at different times. One that took everything queued would
        leave the others nothing when they finish a moment later, and they would wait while it
        works through a long group (measured at 8 clients on two workers: each idle 25-30 % of
        the time, 8 % fewer answers/s; `bench/bench_api.py`). So while fewer than
        SHARE_BELOW jobs per worker are queued, a worker takes its share, the rest staying for
        the others; with more, each takes up to max_group. One worker takes everything.
        """
        queued = self._queue.qsize() + 1  # the job in hand too
        if self.workers == 1 or queued >= self.workers * SHARE_BELOW:
            return self.max_group
        return min(self.max_group, -(-queued // self.workers))

    def _group(self, first: J) -> list[J]:
        """The first job plus whatever is queued (waiting up to max_wait_s for more), up to `_limit()`."""
        jobs, size = [first], self._size(first)
        deadline = time.monotonic() + self.max_wait_s
        limit = self._limit()
        while size < limit:
            try:
                job = self._queue.get_nowait()  # jobs that queued while the last group ran
            except Empty:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=remaining)
                except Empty:
                    break
            if job is None:
                self._queue.put(None)  # keep the stop signal for the loop
                break
            jobs.append(job)
            size += self._size(job)
        return jobs

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._queue.put(None)  # the stop signal, for the other workers
                return
            with self._busy:  # after an idle caller's own job: the group gathers who queued meanwhile
                self._process(self._group(first))

    def close(self, timeout_s: float = 5.0) -> None:
        """Run the queued jobs, then stop the worker threads."""
        if self._threads[0].ident is not None:
            self._queue.put(None)
            deadline = time.monotonic() + timeout_s
            for thread in self._threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
