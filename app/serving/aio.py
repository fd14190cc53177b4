"""Awaiting the thread-based workers (the encoder's micro-batcher, the group writer) from the event loop.

An async endpoint that hands its encode and its write to these workers and awaits their futures
needs no thread of the request pool at all: one event loop serves every waiting request, and the
cores stay with the encoder.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, Generic, TypeVar

import numpy as np
from starlette.concurrency import run_in_threadpool

from app.serving.batching import Continued
from ingest.embedder import Encoder

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


async def settled(future: Future[T], timeout_s: float | None = None) -> T:
    """The future's result, awaited without blocking the loop.

    A cancelled request (its client went away) or a timeout stops the wait only: the worker still
    finishes the job it has taken, so other requests in the same batch or transaction are unaffected.
    Raises TimeoutError after `timeout_s`.

    One loop future, settled from the worker's thread, and one timer: `asyncio.wait_for(shield(wrap_future(f)))`
    did the same through three chained futures, each a further pass of the loop between the worker's answer and the
    request going on (`bench/bench_floor.py`; docs/PERFORMANCE.md, "The grading API's hot path").
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = loop.create_future()

    def hand_back(done: Future[T]) -> None:  # on the worker's thread (or here, if already done)
        with contextlib.suppress(RuntimeError):  # the loop has closed (the app stopped): nobody waits
            loop.call_soon_threadsafe(_copy_outcome, done, waiter)

    future.add_done_callback(hand_back)
    timer = loop.call_later(timeout_s, _expire, waiter) if timeout_s is not None else None
    try:
        return await waiter
    finally:
        if timer is not None:
            timer.cancel()


def _copy_outcome(done: Future[T], waiter: asyncio.Future[T]) -> None:
    if waiter.done():  # timed out or cancelled meanwhile
        return
    if done.cancelled():
        waiter.cancel()
        return
    error = done.exception()
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(done.result())


def _expire(waiter: asyncio.Future[Any]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


async def encode(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """The texts' vectors: through the micro-batcher's queue when there is one, else on a worker thread."""
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    submit = getattr(encoder, "submit", None)
    if submit is not None:
        vectors: np.ndarray = await settled(submit(list(texts)))
        return vectors
    return await run_in_threadpool(encoder.encode, list(texts))


async def encode_then(
    encoder: Encoder, texts: Sequence[str], then: Callable[[np.ndarray], T], timeout_s: float | None = None
) -> np.ndarray | Continued:
    """The texts' vectors, or `Continued(then(vectors))` when the micro-batcher encoded them alone
    and ran `then` on its worker (`BatchingEncoder.submit`). `then` must be safe on any thread.

    Raises TimeoutError after `timeout_s` (a `then` that writes can wait on the database)."""
    submit = getattr(encoder, "submit", None)
    if submit is None or not texts:
        return await encode(encoder, texts)
    outcome: np.ndarray | Continued = await settled(submit(list(texts), then), timeout_s)
    return outcome


class SingleFlight(Generic[K, T]):
    """Concurrent loads of the same key share one call, run on a worker thread.

    For the caches in front of the database: when an entry expires under load, every request
    that arrives before it is read again would otherwise read it too (measured at 32 clients:
    73 reads of one key and one question in 10 s instead of 10). Callers that come while a load
    runs await its result, or its error; one that goes away does not cancel it for the others.
    Several keys can be asked at once (`load_many`): those not already being read are read
    together, in one call.
    """

    def __init__(self) -> None:
        self._loads: dict[K, asyncio.Future[T]] = {}

    async def load(self, key: K, fn: Callable[[], T]) -> T:
        """`fn()`'s result, from the load of `key` already running on this loop or from a new one."""
        (out,) = await self.load_many([key], lambda _keys: {key: fn()})
        if isinstance(out, BaseException):
            raise out
        return out

    async def load_many(self, keys: Sequence[K], fn: Callable[[list[K]], Mapping[K, T | Exception]]
                        ) -> list[T | BaseException]:
        """Each key's value or its own error, in order. Keys already being read on this loop share
        that read; the others are read by one `fn(those keys)` call on a worker thread, which returns a
        value or an exception per key (an exception it raises is every one of its keys')."""
        loop = asyncio.get_running_loop()
        waits: dict[K, asyncio.Future[T]] = {}
        new: list[K] = []
        for key in keys:
            if key in waits:
                continue
            running = self._loads.get(key)
            if running is not None and running.get_loop() is loop:
                waits[key] = running
                continue
            waits[key] = self._loads[key] = loop.create_future()
            waits[key].add_done_callback(partial(self._forget, key))
            new.append(key)
        if new:
            read = asyncio.ensure_future(run_in_threadpool(fn, new))
            read.add_done_callback(partial(_settle, {key: waits[key] for key in new}))
        return await asyncio.gather(*(asyncio.shield(waits[key]) for key in keys), return_exceptions=True)

    def _forget(self, key: K, load: asyncio.Future[T]) -> None:
        if self._loads.get(key) is load:
            del self._loads[key]
        if not load.cancelled():
            load.exception()  # retrieved, even when every caller went away

    def __len__(self) -> int:
        return len(self._loads)


def _settle(loads: dict[K, asyncio.Future[T]], read: asyncio.Future[Mapping[K, T | Exception]]) -> None:
    """Hand each key's value or error from one read to the callers waiting for it."""
    error = asyncio.CancelledError() if read.cancelled() else read.exception()
    values = read.result() if error is None else {}
    for key, load in loads.items():
        value = values.get(key, error or KeyError(key))
        if isinstance(value, BaseException):
            load.set_exception(value)
        else:
            load.set_result(value)
