"""Dynamic micro-batching: concurrent encode requests are gathered and run as one batch."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.serving.coalesce import Coalescer
from contracts.errors import UnavailableError
from ingest.embedder import Encoder


class OverloadedError(UnavailableError):
    """The encode queue is full: 503, retry in a second."""

    code = "overloaded"
    default_retry_after = 1


@dataclass(frozen=True)
class Continued:
    """What a job's continuation returned, having run on the encoder's worker (see `submit`)."""

    value: Any


@dataclass
class _Job:
    texts: list[str]
    then: Callable[[np.ndarray], Any] | None = None
    future: Future[Any] = field(default_factory=Future)


class BatchingEncoder(Coalescer[_Job]):
    """An Encoder that funnels callers through worker threads in batches, with a bounded queue."""

    def __init__(
        self,
        inner: Encoder,
        *,
        max_wait_ms: float = 3.0,
        max_batch: int = 64,
        max_queue: int = 256,
        workers: int = 1,
    ) -> None:
        """`workers` batches are encoded at once (the inner encoder must take concurrent calls)."""
        super().__init__(
            "encoder-batcher", max_group=max_batch, max_queue=max_queue, max_wait_s=max_wait_ms / 1000, workers=workers
        )
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.batches: deque[int] = deque(maxlen=1000)  # sizes of recent batches, for benchmarks and tests
        # An encode that starts with no other running and nothing queued may use every core
        # (`encode_alone`, when the inner encoder has one): a lone request at low load.
        self._alone = getattr(inner, "encode_alone", None)
        self._running = 0
        self._running_lock = threading.Lock()
        self.alone_batches = 0  # how many of them ran alone, for benchmarks and tests
        self._ensure_started()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The texts' vectors: at once when the encoder is idle, else in the next batch.

        A caller that finds nothing queued and nothing running encodes on its own thread (no
        hand-over to the batching thread and back); callers that arrive while an encode runs
        queue up and go in one batch. Raises OverloadedError when the queue is full.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._idle() as idle:
            if idle:
                vectors, _ = self._encode(list(texts), single=True)
                self.batches.append(len(texts))
                return vectors
        result: np.ndarray = self.submit(texts).result()
        return result

    def submit(self, texts: Sequence[str], then: Callable[[np.ndarray], Any] | None = None) -> Future[Any]:
        """Queue the texts for the next batch; the future holds their vectors (for async callers).

        With `then`: when the texts were encoded alone (no other encode running, none queued, no
        batch-mates), the worker goes on to call `then(vectors)` and the future holds
        `Continued(its value)` (or its error): a request at low load finishes on the thread that
        encoded it, warm, without waiting for the event loop in between. Otherwise the future
        holds the vectors and the caller does the rest itself.

        Raises OverloadedError when the queue is full.
        """
        job = _Job(list(texts), then)
        if not job.texts:
            job.future.set_result(np.zeros((0, self.dim), dtype=np.float32))
            return job.future
        self._enqueue(job, OverloadedError("the grader is at capacity; retry in a moment"))
        return job.future

    def _encode(self, texts: list[str], single: bool) -> tuple[np.ndarray, bool]:
        """The inner encoder's vectors, and whether they were a lone request's: one caller's texts
        (`single`: no batch-mates) encoded with no other encode running and none queued. Those run
        on every core, where the inner encoder has `encode_alone`. A batch that starts alone still
        runs on the shared session: it is a sign of load, and the next one would soon start beside it."""
        with self._running_lock:
            self._running += 1
            alone = self._running == 1 and self._queue.empty()
            if alone:
                self.alone_batches += 1
        lone = alone and single
        try:
            if lone and self._alone is not None:
                return self._alone(texts), True
            return self.inner.encode(texts), lone
        finally:
            with self._running_lock:
                self._running -= 1

    def _size(self, job: _Job) -> int:
        return len(job.texts)

    def _process(self, jobs: list[_Job]) -> None:
        texts = [t for job in jobs for t in job.texts]
        try:
            vectors, lone = self._encode(texts, single=len(jobs) == 1)
        except Exception as exc:  # every waiting caller gets the error, the worker keeps going
            for job in jobs:
                job.future.set_exception(exc)
            return
        self.batches.append(len(texts))
        then = jobs[0].then if lone else None
        if then is not None:
            try:
                jobs[0].future.set_result(Continued(then(vectors)))
            except Exception as exc:  # the continuation's own error, for its caller only
                jobs[0].future.set_exception(exc)
            return
        start = 0
        for job in jobs:
            job.future.set_result(vectors[start : start + len(job.texts)])
            start += len(job.texts)
