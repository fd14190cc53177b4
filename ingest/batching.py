"""Dynamic micro-batching: concurrent encode requests are gathered for a few ms and run as one batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from queue import Empty, Full, Queue

import numpy as np

from ingest.embedder import Encoder


class OverloadedError(RuntimeError):
    """The encode queue is full; the caller should answer 503 with Retry-After."""


@dataclass
class _Job:
    texts: list[str]
    future: Future[np.ndarray] = field(default_factory=Future)


class BatchingEncoder:
    """An Encoder that funnels callers through one worker thread in batches, with a bounded queue."""

    def __init__(self, inner: Encoder, *, max_wait_ms: float = 3.0, max_batch: int = 64, max_queue: int = 256) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.max_wait = max_wait_ms / 1000
        self.max_batch = max_batch
        self._queue: Queue[_Job | None] = Queue(maxsize=max_queue)
        self._busy = threading.Lock()  # held while the inner encoder runs
        self.batches: list[int] = []  # sizes of recent batches, for benchmarks and tests
        self._thread = threading.Thread(target=self._run, name="encoder-batcher", daemon=True)
        self._thread.start()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The texts' vectors: at once when the encoder is idle, else in the next batch.

        A caller that finds nothing queued and nothing running encodes on its own thread (no
        hand-over to the batching thread and back); callers that arrive while an encode runs
        queue up and go in one batch. Raises OverloadedError when the queue is full.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._queue.empty() and self._busy.acquire(blocking=False):
            try:
                vectors = self.inner.encode(list(texts))
            finally:
                self._busy.release()
            self.batches = [*self.batches[-999:], len(texts)]
            return vectors
        return self.submit(texts).result()

    def submit(self, texts: Sequence[str]) -> Future[np.ndarray]:
        """Queue the texts for the next batch; the future holds their vectors (for async callers).

        Raises OverloadedError when the queue is full.
        """
        job = _Job(list(texts))
        if not job.texts:
            job.future.set_result(np.zeros((0, self.dim), dtype=np.float32))
            return job.future
        try:
            self._queue.put_nowait(job)
        except Full as exc:
            raise OverloadedError("the grader is at capacity; retry in a moment") from exc
        return job.future

    def _collect(self, first: _Job) -> list[_Job]:
        """The first job plus whatever is already queued, then more for up to max_wait."""
        jobs, size = [first], len(first.texts)
        deadline = time.monotonic() + self.max_wait
        while size < self.max_batch:
            try:
                job = self._queue.get_nowait()  # requests that queued while the last batch ran
            except Empty:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=remaining)
                except Empty:
                    break
            if job is None:
                self._queue.put(None)
                break
            jobs.append(job)
            size += len(job.texts)
        return jobs

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            with self._busy:  # after a caller's own encode: the batch gathers who queued meanwhile
                jobs = self._collect(first)
                texts = [t for job in jobs for t in job.texts]
                try:
                    vectors = self.inner.encode(texts)
                except Exception as exc:  # every waiting caller gets the error, the worker keeps going
                    for job in jobs:
                        job.future.set_exception(exc)
                    continue
            self.batches = [*self.batches[-999:], len(texts)]
            start = 0
            for job in jobs:
                job.future.set_result(vectors[start : start + len(job.texts)])
                start += len(job.texts)

    def close(self) -> None:
        """Stop the worker thread after the queued jobs."""
        self._queue.put(None)
        self._thread.join(timeout=5)
