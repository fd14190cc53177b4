"""The micro-batcher: concurrent callers share batches, the queue is bounded, errors reach callers."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from app.serving.batching import BatchingEncoder, OverloadedError
from tests.fakes import FakeEncoder


class SlowEncoder(FakeEncoder):
    """A fake encoder that takes a while per batch, like a real one under load."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(self.delay)
        return super().encode(texts)


def test_results_match_the_inner_encoder_in_order() -> None:
    inner = FakeEncoder()
    batcher = BatchingEncoder(inner, max_wait_ms=1)
    texts = ["ring all-reduce", "zero stage 3", "pipeline bubble"]
    assert np.allclose(batcher.encode(texts), FakeEncoder().encode(texts))
    batcher.close()


def test_concurrent_callers_are_batched() -> None:
    inner = SlowEncoder(0.02)
    batcher = BatchingEncoder(inner, max_wait_ms=5, max_batch=64)
    out: dict[int, np.ndarray] = {}

    def call(i: int) -> None:
        out[i] = batcher.encode([f"answer number {i}"])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert len(out) == 32
    for i, vec in out.items():
        assert np.allclose(vec, FakeEncoder().encode([f"answer number {i}"]))
    assert len(inner.calls) < 16 and max(inner.calls) > 1  # far fewer encoder calls than callers


def test_full_queue_refuses_instead_of_growing() -> None:
    batcher = BatchingEncoder(SlowEncoder(0.2), max_wait_ms=0, max_batch=1, max_queue=1)
    errors: list[Exception] = []

    def call() -> None:
        try:
            batcher.encode(["x"])
        except OverloadedError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher.close()
    assert errors and all("capacity" in str(e) for e in errors)


def test_encoder_errors_reach_every_waiting_caller() -> None:
    class Broken(FakeEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            raise ValueError("model exploded")

    batcher = BatchingEncoder(Broken(), max_wait_ms=1)
    with pytest.raises(ValueError, match="exploded"):
        batcher.encode(["x"])
    batcher.close()


def test_a_lone_caller_encodes_on_its_own_thread() -> None:
    seen: list[str] = []

    class Recording(FakeEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            seen.append(threading.current_thread().name)
            return super().encode(texts)

    batcher = BatchingEncoder(Recording(), max_wait_ms=0)
    batcher.encode(["alone"])
    batcher.close()
    assert seen == [threading.current_thread().name]  # no hand-over to the batching thread


def test_workers_encode_batches_at_once_and_each_caller_gets_its_own_vectors() -> None:
    running, most = [0], [0]
    lock = threading.Lock()

    class Overlapping(FakeEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
            return super().encode(texts)

    batcher = BatchingEncoder(Overlapping(), max_wait_ms=0, max_batch=4, workers=2)
    futures = [batcher.submit([f"answer {i}"]) for i in range(12)]
    vectors = [f.result(timeout=10) for f in futures]
    batcher.close()
    for i, vec in enumerate(vectors):
        assert np.allclose(vec, FakeEncoder().encode([f"answer {i}"]))
    assert most[0] == 2  # two batches ran at once, never more
    assert all(size <= 4 for size in batcher.batches)


class Gated(FakeEncoder):
    """A fake encoder whose "hold-..." texts wait for their gate; the groups it was given, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.gates = {"hold-a": threading.Event(), "hold-b": threading.Event()}
        self.holding = threading.Semaphore(0)
        self.groups: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if texts[0] in self.gates:
            self.holding.release()
            self.gates[texts[0]].wait(10)
        else:
            self.groups.append(list(texts))
        return super().encode(texts)


@pytest.mark.parametrize(("queued", "first_group"), [(6, 3), (20, 16)])
def test_a_worker_leaves_the_others_their_share_of_a_short_queue(queued: int, first_group: int) -> None:
    inner = Gated()
    batcher = BatchingEncoder(inner, max_wait_ms=0, max_batch=16, workers=2)
    held = []
    for name in inner.gates:  # both workers busy, one held job each
        held.append(batcher.submit([name]))
        assert inner.holding.acquire(timeout=10)
    waiting = [batcher.submit([f"answer {i}"]) for i in range(queued)]
    inner.gates["hold-a"].set()  # one worker finishes while the other is still busy
    for f in waiting:
        f.result(timeout=10)
    inner.gates["hold-b"].set()
    for f in held:
        f.result(timeout=10)
    batcher.close()
    # Fewer than 8 queued per worker: this worker's half, the rest left for the other one;
    # more: a full batch.
    assert len(inner.groups[0]) == first_group
    assert sorted(t for g in inner.groups for t in g) == sorted(f"answer {i}" for i in range(queued))


def test_one_worker_never_overlaps_batches() -> None:
    running, most = [0], [0]

    class Overlapping(FakeEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            running[0] += 1
            most[0] = max(most[0], running[0])
            time.sleep(0.02)
            running[0] -= 1
            return super().encode(texts)

    batcher = BatchingEncoder(Overlapping(), max_wait_ms=0, max_batch=2, workers=1)
    for f in [batcher.submit([f"a{i}"]) for i in range(8)]:
        f.result(timeout=10)
    batcher.close()
    assert most[0] == 1


def test_close_stops_every_worker() -> None:
    batcher = BatchingEncoder(FakeEncoder(), max_wait_ms=0, workers=3)
    batcher.submit(["x"]).result(timeout=10)
    batcher.close()
    assert not any(t.is_alive() for t in batcher._threads)


def test_the_served_encoder_gets_workers_only_if_it_takes_concurrent_calls(caplog: pytest.LogCaptureFixture) -> None:
    from app.config import Settings
    from app.serving.runtime import batched

    class Concurrent(FakeEncoder):
        concurrent_calls = True

    auto = Settings(encoder_workers=None)
    workers, threads = auto.encoder_parallelism
    assert workers >= 1 and threads >= 1
    two = Settings(encoder_workers=2, encoder_threads=1)
    assert two.encoder_parallelism == (2, 1)
    for settings, encoder, expected in ((two, Concurrent(), 2), (two, FakeEncoder(), 1)):
        batcher = batched(settings, encoder)
        assert batcher.workers == expected  # type: ignore[attr-defined]
        batcher.close()  # type: ignore[attr-defined]
    assert "takes one call at a time" in caplog.text  # an explicit setting that cannot hold is said


class SoloEncoder(FakeEncoder):
    """Records which entry point each call took; `encode` can be held to keep a worker busy."""

    def __init__(self) -> None:
        super().__init__()
        self.entry: list[str] = []
        self.hold = threading.Event()
        self.hold.set()
        self.holding = threading.Event()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.entry.append("encode")
        return super().encode(texts)

    def encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        self.entry.append("alone")
        self.holding.set()
        assert self.hold.wait(5)
        return super().encode(texts)


def test_a_lone_encode_uses_every_core_and_a_concurrent_one_does_not() -> None:
    inner = SoloEncoder()
    batcher = BatchingEncoder(inner, max_wait_ms=0, workers=2)
    assert np.allclose(batcher.encode(["ring"]), FakeEncoder().encode(["ring"]))
    assert batcher.submit(["tree"]).result(5).shape == (1, inner.dim)
    assert inner.entry == ["alone", "alone"] and batcher.alone_batches == 2
    inner.hold.clear()  # the next lone encode holds its worker while a second request comes in
    inner.holding.clear()
    first = batcher.submit(["bus bandwidth"])
    assert inner.holding.wait(5)
    second = batcher.submit(["algorithm bandwidth"])  # the other worker takes it, beside the running one
    assert np.allclose(second.result(5), FakeEncoder().encode(["algorithm bandwidth"]))
    inner.hold.set()
    assert np.allclose(first.result(5), FakeEncoder().encode(["bus bandwidth"]))
    assert inner.entry[2:] == ["alone", "encode"]
    batcher.close()


def test_a_batch_that_starts_alone_runs_on_the_shared_session() -> None:
    inner = SoloEncoder()
    batcher = BatchingEncoder(inner, max_wait_ms=0, workers=1)
    inner.hold.clear()  # a lone request holds the one worker while three more queue up
    first = batcher.submit(["holds the worker"])
    assert inner.holding.wait(5)
    queued = [batcher.submit([f"answer {i}"]) for i in range(3)]
    inner.hold.set()
    first.result(5)
    for i, future in enumerate(queued):
        assert np.allclose(future.result(5), FakeEncoder().encode([f"answer {i}"]))
    # The three go together with nothing else running or queued, but a batch is a sign of load.
    assert list(batcher.batches)[-1] == 3 and batcher.alone_batches == 2
    assert inner.entry == ["alone", "encode"]
    batcher.close()


def test_an_encoder_without_a_solo_entry_is_called_as_before() -> None:
    inner = FakeEncoder()
    batcher = BatchingEncoder(inner, max_wait_ms=0, workers=2)
    batcher.encode(["ring"])
    assert inner.calls == [1] and batcher.alone_batches == 1  # alone, on the one entry point it has
    batcher.close()


def test_the_solo_session_is_on_by_default_and_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from app.config import Settings

    assert Settings().encoder_solo == min(os.cpu_count() or 1, 4)
    monkeypatch.setenv("TUTOR_ENCODER_SOLO_THREADS", "0")
    assert Settings().encoder_solo == 0


def test_a_lone_job_continues_on_the_worker_and_a_batched_one_does_not() -> None:
    from app.serving.batching import Continued

    inner = SlowEncoder(0.05)
    batcher = BatchingEncoder(inner, max_wait_ms=0, max_batch=64, workers=1)
    threads: list[str] = []

    def then(vectors: np.ndarray) -> float:
        threads.append(threading.current_thread().name)
        return float(vectors.sum())

    lone = batcher.submit(["ring all-reduce"], then).result(5)
    assert isinstance(lone, Continued) and threads == ["encoder-batcher"]
    assert lone.value == pytest.approx(float(FakeEncoder().encode(["ring all-reduce"]).sum()), rel=1e-6)

    def failing(vectors: np.ndarray) -> None:
        raise LookupError("the continuation's own error")

    with pytest.raises(LookupError, match="own error"):
        batcher.submit(["tree all-reduce"], failing).result(5)
    # Jobs that queue behind a running encode go together: each gets its vectors, nobody's `then` runs.
    holder = batcher.submit(["holds the worker"])
    time.sleep(0.01)
    queued = [batcher.submit([f"answer {i}"], then) for i in range(3)]
    holder.result(5)
    for i, future in enumerate(queued):
        assert np.allclose(future.result(5), FakeEncoder().encode([f"answer {i}"]))
    assert threads == ["encoder-batcher"] and inner.calls[-1] == 3
    batcher.close()
