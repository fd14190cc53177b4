"""The worker's side of the shared job queue: heartbeats, taking jobs it can place, reporting their progress.

- Every `heartbeat_s` the worker reports itself: its id, hardware, the queues it takes from and its runs. The
  API records workers from these and fails (or retries) the runs of one whose heartbeats stop.
- It takes a job only when it could start it now, and looks at the heads of all its queues first: the oldest
  head wins, and if the oldest cannot start yet (its devices are busy) nothing is taken, so a large run is
  never overtaken by later small ones (strict FIFO over the worker's devices).
- Each run's events (running, progress, the outcome) go back as signed reports on the reports queue; a
  cancellation flag set by the API is checked every few tenths of a second and ends the run's process group.
- A job that is not signed with the worker token is never taken; one that has expired or was cancelled while
  it waited is dropped with a report.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from typing import Any

from pydantic import ValidationError

from contracts.jobs import BadMessage, JobQueue, verify
from worker.catalogue import CATALOGUE
from worker.devices import DeviceInfo, hardware, offered, run_hardware
from worker.runs import Run, RunQueue
from worker.settings import WorkerSettings

log = logging.getLogger("tutor.worker")
POLL_S = 0.2


class Consumer:
    """Takes jobs from the shared queue into the worker's run queue and reports on them."""

    def __init__(self, settings: WorkerSettings, runs: RunQueue, jobs: JobQueue, info: DeviceInfo) -> None:
        self.settings, self.runs, self.jobs, self.info = settings, runs, jobs, info
        self.id = f"{settings.name}-{secrets.token_hex(3)}"
        self.hardware = hardware(info)
        self.queues = offered(info)
        self._kinds = {name: (kind, size) for name, kind, size in self.queues}
        self._held: dict[str, Run] = {}
        self._sent: dict[str, int] = {}  # events forwarded per job
        self._pgids: dict[str, int] = {}
        self._outbox: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopping = False
        self._warned: set[str] = set()
        self._threads = [
            threading.Thread(target=self._loop, name="queue-consumer", daemon=True),
            threading.Thread(target=self._send, name="queue-reporter", daemon=True),
        ]

    # lifecycle
    def start(self) -> None:
        """Announce the worker and start taking jobs."""
        self.heartbeat()
        for thread in self._threads:
            thread.start()
        log.info("worker %s takes jobs from %d queues on %s", self.id, len(self.queues), self.jobs.backend)

    def stopping(self) -> None:
        """Stop taking jobs; runs ended from now on are reported as abandoned (the API retries them)."""
        self._stopping = True

    def stop(self) -> None:
        """Say goodbye and send what is left to report (call after the run queue has stopped)."""
        self._stopping = True
        self._stop.set()
        self._report({"type": "bye"})
        self._outbox.put(None)
        self._threads[1].join(timeout=10)

    # reports
    def _report(self, body: dict[str, Any]) -> None:
        self._outbox.put({"v": 1, "worker": self.id, "at": time.time(), **body})

    def _send(self) -> None:
        while True:
            body = self._outbox.get()
            if body is None:
                return
            for attempt in range(50):
                try:
                    self.jobs.report(body)
                    break
                except Exception as exc:  # the queue is down: keep the report and retry
                    if attempt == 0:
                        log.warning("could not send a report (%s); retrying", exc)
                    time.sleep(min(0.1 * 2**attempt, 5))

    def heartbeat(self) -> None:
        """Report this worker: hardware, queues, held runs."""
        with self._lock:
            held = [
                {"job": jid, "attempt": run.job["attempt"] if run.job else 0, "status": run.status, "pgid": run.pgid}
                for jid, run in self._held.items()
            ]
        self._report({
            "type": "heartbeat", "name": self.settings.name, "hardware": self.hardware,
            "queues": [name for name, _, _ in self.queues], "held": held, "stopping": self._stopping,
        })

    def listen(self, run: Run, event: dict[str, Any]) -> None:
        """The run queue's listener: a job's events become reports (called under the queue's lock)."""
        job = run.job
        if job is None:
            return
        base = {"job": job["job"], "attempt": job["attempt"]}
        if event["type"] == "done":
            kind = "abandoned" if self._stopping and event["status"] == "cancelled" else "done"
            self._report({**base, "type": kind, "status": event["status"], "error": event.get("error"),
                          "result": event.get("result"), "pgid": run.pgid})
            with self._lock:
                self._held.pop(run.id, None)
            return
        if event["type"] == "status" and event.get("status") == "queued":
            return  # the worker's own queue: the API tells the learner their place in the shared one
        with self._lock:
            n = self._sent.get(run.id, 0)
            self._sent[run.id] = n + 1
        self._report({**base, "type": "event", "seq": int(job["seq_base"]) + n, "event": event})

    # taking jobs
    def _loop(self) -> None:
        next_beat = time.monotonic() + self.settings.heartbeat_s
        while not self._stop.is_set():
            took = False
            try:
                if time.monotonic() >= next_beat:
                    self.heartbeat()
                    next_beat = time.monotonic() + self.settings.heartbeat_s
                self._watch()
                if not self._stopping:
                    took = self._take()
            except Exception:  # a queue that is down for a moment must not end the worker
                log.exception("the job queue failed; retrying")
                time.sleep(1)
            if not took:
                self._stop.wait(POLL_S)

    def _watch(self) -> None:
        """Cancel held runs whose job was cancelled; report process groups as they start."""
        with self._lock:
            held = list(self._held.items())
        for jid, run in held:
            if run.finished:
                continue
            if self.jobs.revoked(jid):
                self.runs.cancel(run.id)
            if run.pgid is not None and self._pgids.get(jid) != run.pgid and run.job is not None:
                self._pgids[jid] = run.pgid
                self._report({"type": "state", "job": jid, "attempt": run.job["attempt"], "pgid": run.pgid})

    def _oldest(self) -> tuple[str, dict[str, Any]] | None:
        best: tuple[str, dict[str, Any]] | None = None
        for name, _, _ in self.queues:
            head = self.jobs.head(name)
            if head is None:
                continue
            try:
                body = verify(self.jobs.token, head)
            except BadMessage:
                if name not in self._warned:
                    self._warned.add(name)
                    log.error("the job at the head of %s is not signed with this worker's token "
                              "(TUTOR_WORKER_TOKEN must be the API's); not taking it", name)
                continue
            if best is None or float(body.get("queued_at", 0)) < float(best[1].get("queued_at", 0)):
                best = (name, body)
        return best

    def _take(self) -> bool:
        oldest = self._oldest()
        if oldest is None:
            return False
        name, _ = oldest
        kind, size = self._kinds[name]
        want = "cpu" if kind == "cpu" else "cuda"
        if not self.runs.can_start_now(size, want):
            return False  # strict FIFO: wait for the devices the oldest job needs
        data = self.jobs.take(name)
        if data is None:
            return True
        try:
            body = verify(self.jobs.token, data)
        except BadMessage:
            log.error("refused a job on %s that is not signed with the worker token", name)
            return True
        self._accept(body, kind, want)
        return True

    def _accept(self, job: dict[str, Any], kind: str, want: str) -> None:
        base = {"job": job.get("job"), "attempt": job.get("attempt")}
        if float(job.get("expires_at", 0)) < time.time():
            self._report({**base, "type": "dropped", "reason": "the job waited in the queue past its expiry"})
            return
        if self.jobs.revoked(str(job["job"])):
            self._report({**base, "type": "dropped", "reason": "cancelled before a worker took it"})
            return
        demo = CATALOGUE.get(str(job.get("demo")))
        try:
            if demo is None:
                raise ValueError(f"this worker has no demo {job.get('demo')!r}")
            params = demo.params.model_validate(job.get("params") or {})
            if params.time_limit_s > self.settings.max_time_limit_s:
                raise ValueError(f"time_limit_s is over this worker's {self.settings.max_time_limit_s}s")
        except (ValidationError, ValueError) as exc:
            self._report({**base, "type": "done", "status": "failed", "error": f"the worker refused the job: {exc}",
                          "result": None})
            return
        ran_on = run_hardware(self.hardware, kind, demo.world_size(params))
        self._report({**base, "type": "claimed", "hardware": ran_on})
        run = self.runs.submit_job(demo, params, job, want)
        with self._lock:
            if not run.finished:
                self._held[run.id] = run
