"""Awaiting the encoder's workers from the event loop: results, no-batcher fallback, cancelled waits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import pytest

from app.serving.aio import SingleFlight, encode, settled
from app.serving.batching import BatchingEncoder
from tests.fakes import FakeEncoder


def test_encode_through_the_batcher_and_without_it() -> None:
    texts = ["ring all-reduce", "pipeline bubble"]
    expected = FakeEncoder().encode(texts)
    batcher = BatchingEncoder(FakeEncoder(), max_wait_ms=0)
    assert np.allclose(asyncio.run(encode(batcher, texts)), expected)
    batcher.close()
    assert np.allclose(asyncio.run(encode(FakeEncoder(), texts)), expected)  # plain encoder: a worker thread
    assert asyncio.run(encode(FakeEncoder(), [])).shape == (0, FakeEncoder().dim)


def test_a_cancelled_wait_leaves_the_batch_and_the_workers_intact() -> None:
    release = threading.Event()

    class Held(FakeEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            release.wait(5)
            return super().encode(texts)

    batcher = BatchingEncoder(Held(), max_wait_ms=0)

    async def scenario() -> np.ndarray:
        gone = asyncio.create_task(encode(batcher, ["client went away"]))
        stays = asyncio.create_task(encode(batcher, ["client still here"]))
        await asyncio.sleep(0.05)
        gone.cancel()
        release.set()
        return await asyncio.wait_for(stays, 5)

    vec = asyncio.run(scenario())
    assert np.allclose(vec, FakeEncoder().encode(["client still here"]))
    # The worker set the cancelled caller's result without failing, and still serves.
    assert np.allclose(batcher.submit(["next"]).result(timeout=5), FakeEncoder().encode(["next"]))
    batcher.close()


def _later(seconds: float, outcome: object) -> Future[object]:
    """A future a worker thread settles after `seconds`: with `outcome`, or raising it if an exception."""
    future: Future[object] = Future()

    def work() -> None:
        time.sleep(seconds)
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    threading.Thread(target=work, daemon=True).start()
    return future


def test_settled_gives_a_workers_result_or_its_error_and_times_out_without_stopping_it() -> None:
    async def scenario() -> None:
        assert await settled(_later(0.01, "vectors")) == "vectors"
        assert await settled(_later(0.01, "stored"), timeout_s=5) == "stored"
        with pytest.raises(KeyError):
            await settled(_later(0.01, KeyError("worker failed")), timeout_s=5)
        done: Future[object] = Future()
        done.set_result("already")
        assert await settled(done, timeout_s=5) == "already"
        slow = _later(0.2, "late")
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await settled(slow, timeout_s=0.05)
        assert time.monotonic() - started < 0.19
        assert slow.result(timeout=5) == "late"  # the worker went on; its late answer is dropped quietly
        await asyncio.sleep(0.05)
        cancelled: Future[object] = Future()
        threading.Timer(0.01, cancelled.cancel).start()
        with pytest.raises(asyncio.CancelledError):
            await settled(cancelled, timeout_s=5)

    asyncio.run(scenario())


def test_a_worker_that_answers_after_the_loop_closed_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    future: Future[object] = Future()

    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            await settled(future, timeout_s=0.01)

    asyncio.run(scenario())  # the loop is closed when this returns
    future.set_result("too late")  # the hand-back finds the loop closed
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_single_flight_shares_one_load_per_key_among_concurrent_callers() -> None:
    calls: list[str] = []
    release = threading.Event()

    def load(key: str) -> str:
        calls.append(key)
        release.wait(5)
        return key.upper()

    flight: SingleFlight[str, str] = SingleFlight()

    async def scenario() -> list[str]:
        waiting = [asyncio.create_task(flight.load(k, lambda k=k: load(k))) for k in ("a", "a", "b", "a")]
        await asyncio.sleep(0.05)
        release.set()
        return list(await asyncio.gather(*waiting))

    assert asyncio.run(scenario()) == ["A", "A", "B", "A"]
    assert sorted(calls) == ["a", "b"] and len(flight) == 0
    assert asyncio.run(flight.load("a", lambda: load("a"))) == "A"  # once done, the next caller reads again
    assert calls.count("a") == 2


def test_single_flight_gives_the_error_to_every_caller_and_survives_a_cancelled_one() -> None:
    release = threading.Event()

    def failing() -> str:
        release.wait(5)
        raise LookupError("no such key")

    flight: SingleFlight[str, str] = SingleFlight()

    async def scenario() -> list[BaseException | str]:
        gone = asyncio.create_task(flight.load("k", failing))
        stays = [asyncio.create_task(flight.load("k", failing)) for _ in range(2)]
        await asyncio.sleep(0.05)
        gone.cancel()  # the first caller went away: the load goes on for the others
        release.set()
        return list(await asyncio.gather(*stays, return_exceptions=True))

    errors = asyncio.run(scenario())
    assert all(isinstance(e, LookupError) for e in errors) and len(flight) == 0
    with pytest.raises(LookupError):
        asyncio.run(flight.load("k", failing))


def test_single_flight_reads_several_keys_in_one_call_and_shares_the_ones_already_being_read() -> None:
    calls: list[list[str]] = []
    release = threading.Event()

    def read(keys: list[str]) -> dict[str, str | Exception]:
        calls.append(list(keys))
        release.wait(5)
        return {k: LookupError(k) if k == "nope" else k.upper() for k in keys}

    flight: SingleFlight[str, str] = SingleFlight()

    async def scenario() -> list[list[str | BaseException]]:
        first = asyncio.create_task(flight.load_many(["a", "b"], read))
        await asyncio.sleep(0.05)  # "a" and "b" are being read now
        second = asyncio.create_task(flight.load_many(["b", "c", "nope", "c"], read))
        await asyncio.sleep(0.05)
        release.set()
        return [await first, await second]

    first, second = asyncio.run(scenario())
    assert first == ["A", "B"]
    assert second[:2] == ["B", "C"] and second[3] == "C"
    assert isinstance(second[2], LookupError)  # its own key's error only
    assert calls == [["a", "b"], ["c", "nope"]]  # "b" was shared, "c" read once
    assert len(flight) == 0


def test_single_flight_gives_an_error_of_the_whole_read_to_each_of_its_keys() -> None:
    def down(keys: list[str]) -> dict[str, str | Exception]:
        raise ConnectionError("database went away")

    flight: SingleFlight[str, str] = SingleFlight()
    out = asyncio.run(flight.load_many(["a", "b"], down))
    assert all(isinstance(e, ConnectionError) for e in out) and len(out) == 2
    assert len(flight) == 0
