"""The run queue with a fake executor: FIFO, positions, a full queue, cancellation, lost runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.errors import NotFoundError
from contracts.errors import InvalidParamsError, QueueFullError, RunLostError
from tests.worker.helpers import wait_for
from worker.catalogue import CATALOGUE
from worker.devices import DeviceInfo
from worker.runs import Outcome, Run, RunQueue
from worker.settings import WorkerSettings


class Gate:
    """An executor that holds each run until released (or cancelled)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, run: Run, emit: Callable[[dict[str, Any]], None]) -> Outcome:
        emit({"type": "progress", "message": "working", "fraction": 0.5})
        while not self.release.wait(0.01):
            if run.cancel.is_set():
                return "cancelled", None, "cancelled by request"
        return "succeeded", {"ok": True}, None


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def queue(gate: Gate) -> Iterator[RunQueue]:
    q = RunQueue(WorkerSettings(token="t", max_queue=2, max_time_limit_s=300), DeviceInfo("cpu"), gate)
    q.start()
    yield q
    gate.release.set()
    q.stop()


def _submit(queue: RunQueue, name: str = "sampler", **values: Any) -> Run:
    demo = CATALOGUE[name]
    return queue.submit(demo, demo.params.model_validate(values))


def test_one_run_at_a_time_then_fifo(queue: RunQueue, gate: Gate) -> None:
    first = _submit(queue)
    wait_for(lambda: queue.view(first), lambda v: v["status"] == "running")
    second, third = _submit(queue), _submit(queue, "matmul")
    assert (queue.position(second), queue.position(third)) == (1, 2)
    with pytest.raises(QueueFullError) as full:
        _submit(queue)
    assert full.value.retry_after == 10
    gate.release.set()
    for run in (first, second, third):
        view = wait_for(lambda run=run: queue.view(run), lambda v: v["status"] == "succeeded")
        assert view["result"] == {"ok": True}
    kinds = [e["type"] for e in first.events]
    assert kinds[0] == "status" and "progress" in kinds and kinds[-1] == "done"
    assert [e["seq"] for e in first.events] == list(range(len(first.events)))


def test_cancel_queued_and_running(queue: RunQueue) -> None:
    running, waiting = _submit(queue), _submit(queue)
    wait_for(lambda: queue.view(running), lambda v: v["status"] == "running")
    assert queue.cancel(waiting.id).status == "cancelled"
    queue.cancel(running.id)
    wait_for(lambda: queue.view(running), lambda v: v["status"] == "cancelled")


def test_time_limit_over_the_workers_is_422(queue: RunQueue) -> None:
    with pytest.raises(InvalidParamsError):
        _submit(queue, time_limit_s=400)


def test_unknown_and_lost_runs(queue: RunQueue) -> None:
    with pytest.raises(NotFoundError):
        queue.get(f"{queue.boot}-000000000000")
    other_boot = "0" * len(queue.boot) if queue.boot != "0" * len(queue.boot) else "1" * len(queue.boot)
    with pytest.raises(RunLostError):
        queue.get(f"{other_boot}-000000000000")
