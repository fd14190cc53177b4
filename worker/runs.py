"""Runs and the run queue: FIFO, one run at a time per device, bounded, cancellable.

A dispatcher thread starts the head of the queue as soon as the devices it needs are free (strict FIFO, so a
large run is never starved); each run executes on its own thread, which owns the run's process group.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contracts.errors import InvalidParamsError, NotFoundError, QueueFullError, RunLostError
from worker.catalogue import Demo
from worker.devices import DeviceInfo, Placement, all_slots, place
from worker.params import DemoParams
from worker.settings import WorkerSettings

TERMINAL = ("succeeded", "failed", "cancelled")


@dataclass
class Run:
    """One demo run: its parameters, state, events (progress and status) and result."""

    id: str
    demo: str
    params: dict[str, Any]
    world_size: int
    time_limit_s: int
    created_at: float = field(default_factory=time.time)
    status: str = "queued"
    placement: Placement | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    pgid: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    cancel: threading.Event = field(default_factory=threading.Event)
    # A run taken from the shared queue: the device kind it was queued for ('cpu' or 'cuda') and its job.
    want: str | None = None
    job: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        """Whether the run has reached a terminal state."""
        return self.status in TERMINAL

    def view(self, position: int | None, *, with_result: bool = True) -> dict[str, Any]:
        """The JSON shape clients see."""
        placement = self.placement
        return {
            "id": self.id,
            "demo": self.demo,
            "status": self.status,
            "position": position,
            "params": self.params,
            "world_size": self.world_size,
            "backend": None if placement is None else ("nccl" if placement.kind == "cuda" else "gloo"),
            "placement": None if placement is None else placement.as_dict(),
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "error": self.error,
            "pgid": self.pgid,
            "events": len(self.events),
            "result": self.result if with_result else None,
        }


Outcome = tuple[str, dict[str, Any] | None, str | None]
Executor = Callable[[Run, Callable[[dict[str, Any]], None]], Outcome]
Listener = Callable[[Run, dict[str, Any]], None]


class RunQueue:
    """The worker's runs: a bounded FIFO queue in front of the devices, plus recent history."""

    def __init__(
        self, settings: WorkerSettings, info: DeviceInfo, execute: Executor, listener: Listener | None = None
    ) -> None:
        self.settings, self.info, self.execute = settings, info, execute
        self.listener = listener  # told of every event (under the queue's lock: it must not block)
        self.boot = secrets.token_hex(4)
        self._cond = threading.Condition()
        self._queue: deque[Run] = deque()
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._running: dict[str, Run] = {}
        self._free = all_slots(info)
        self._stopping = False
        self._dispatcher = threading.Thread(target=self._dispatch, name="run-dispatcher", daemon=True)

    def start(self) -> None:
        """Start dispatching queued runs."""
        self._dispatcher.start()

    def stop(self) -> None:
        """Cancel everything queued or running and wait (briefly) for running runs to end."""
        with self._cond:
            self._stopping = True
            for run in list(self._queue):
                self._finish_queued(run, "worker shutting down")
            for run in self._running.values():
                run.cancel.set()
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._running, timeout=10)

    def submit(self, demo: Demo, params: DemoParams) -> Run:
        """Queue a run (422 if its time limit exceeds the worker's, 429 if the queue is full)."""
        if params.time_limit_s > self.settings.max_time_limit_s:
            raise InvalidParamsError(
                f"time_limit_s must be at most {self.settings.max_time_limit_s} on this worker",
                details={"fields": [{"field": "time_limit_s", "message": "over the worker's limit"}]},
            )
        with self._cond:
            if len(self._queue) >= self.settings.max_queue:
                raise QueueFullError(
                    f"the demo queue is full ({len(self._queue)} waiting); try again shortly",
                    retry_after=self.settings.retry_after_s,
                )
            run = Run(
                f"{self.boot}-{secrets.token_hex(6)}",
                demo.name,
                params.model_dump(),
                demo.world_size(params),
                params.time_limit_s,
            )
            self._runs[run.id] = run
            self._queue.append(run)
            self._trim()
            self._announce_positions()
            self._cond.notify_all()
        return run

    def submit_job(self, demo: Demo, params: DemoParams, job: dict[str, Any], want: str) -> Run:
        """Queue a job taken from the shared queue (its own id; the consumer bounds what it takes)."""
        with self._cond:
            run = Run(job["job"], demo.name, params.model_dump(), demo.world_size(params), params.time_limit_s,
                      want=want, job=job)
            self._runs[run.id] = run
            self._queue.append(run)
            self._trim()
            self._announce_positions()
            self._cond.notify_all()
        return run

    def can_start_now(self, world_size: int, want: str) -> bool:
        """Whether a run of this size and kind would start at once (nothing waits and its devices are free)."""
        with self._cond:
            return not self._queue and not self._stopping and place(self.info, world_size, self._free, want) is not None

    def get(self, run_id: str) -> Run:
        """A run by id (410 for a run from before a restart, 404 for an unknown one)."""
        with self._cond:
            run = self._runs.get(run_id)
        if run is not None:
            return run
        if run_id.startswith("j_"):
            raise NotFoundError(f"no run {run_id!r} on this worker")
        prefix = run_id.split("-", 1)[0]
        if "-" in run_id and len(prefix) == len(self.boot) and prefix != self.boot:
            raise RunLostError("the demo worker restarted since this run was started; the run was ended and is lost")
        raise NotFoundError(f"no run {run_id!r}")

    def position(self, run: Run) -> int | None:
        """1 for the next run to start, 2 for the one after..., None once started."""
        with self._cond:
            return self._queue.index(run) + 1 if run in self._queue else None

    def view(self, run: Run, *, with_result: bool = True) -> dict[str, Any]:
        """The run's JSON view with its current queue position."""
        return run.view(self.position(run), with_result=with_result)

    def cancel(self, run_id: str) -> Run:
        """Cancel a queued run at once, or end a running one's process group (no-op once finished)."""
        run = self.get(run_id)
        with self._cond:
            if run in self._queue:
                self._finish_queued(run, "cancelled by request")
                self._announce_positions()
            elif not run.finished:
                run.cancel.set()
        return run

    def events_after(self, run: Run, after: int) -> list[dict[str, Any]]:
        """The run's events with seq > after."""
        with self._cond:
            return run.events[after + 1 :]

    def add_event(self, run: Run, event: dict[str, Any]) -> None:
        """Append an event (numbered) to a run."""
        with self._cond:
            self._add(run, event)

    def stats(self) -> dict[str, Any]:
        """Queue occupancy, for /v1/info."""
        with self._cond:
            return {"running": list(self._running), "queued": len(self._queue), "max_queue": self.settings.max_queue}

    def _add(self, run: Run, event: dict[str, Any]) -> None:
        numbered = {**event, "seq": len(run.events)}
        run.events.append(numbered)
        if self.listener is not None:
            self.listener(run, numbered)
        self._cond.notify_all()

    def _finish_queued(self, run: Run, reason: str) -> None:
        self._queue.remove(run)
        run.status, run.error, run.finished_at = "cancelled", reason, time.time()
        self._add(run, {"type": "done", "status": run.status, "error": run.error})

    def _announce_positions(self) -> None:
        for i, run in enumerate(self._queue):
            self._add(run, {"type": "status", "status": "queued", "position": i + 1})

    def _trim(self) -> None:
        finished = [r for r in self._runs.values() if r.finished]
        for run in finished[: max(0, len(self._runs) - self.settings.history)]:
            del self._runs[run.id]

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._startable() is not None)
                if self._stopping:
                    return
                run, placement = self._startable() or (None, None)
                assert run is not None and placement is not None
                self._queue.popleft()
                self._free -= set(placement.slots)
                run.placement, run.status, run.started_at = placement, "running", time.time()
                self._running[run.id] = run
                self._add(run, {"type": "status", "status": "running", "placement": placement.as_dict()})
                self._announce_positions()
            threading.Thread(target=self._execute, args=(run,), name=f"run-{run.id}", daemon=True).start()

    def _startable(self) -> tuple[Run, Placement] | None:
        if not self._queue:
            return None
        placement = place(self.info, self._queue[0].world_size, self._free, self._queue[0].want)
        return (self._queue[0], placement) if placement else None

    def _execute(self, run: Run) -> None:
        try:
            status, result, error = self.execute(run, lambda event: self.add_event(run, event))
        except Exception as exc:  # the executor must never take the queue down
            status, result, error = "failed", None, f"the worker could not run the demo: {exc}"
        with self._cond:
            run.status, run.result, run.error, run.finished_at = status, result, error, time.time()
            assert run.placement is not None
            self._free |= set(run.placement.slots)
            del self._running[run.id]
            self._add(run, {"type": "done", "status": status, "error": error, "result": result})
            self._trim()
            self._cond.notify_all()
