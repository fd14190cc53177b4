"""Every API process drains the workers' reports into the database and reaps lost workers.

- Reports come off the shared reports queue one at a time (an atomic dequeue: two API processes never apply
  the same one) and are applied idempotently: events by (job, seq), state changes only forward and only for
  the job's current attempt and worker, so a late or repeated report changes nothing.
- A report without a valid signature (HMAC of the worker token) is refused and logged.
- The reaper marks workers whose heartbeats stopped as lost; their jobs fail with the reason, or, on a first
  attempt whose learner is still waiting (polled or streamed it recently), go back on the queue once. Its
  updates are conditional, so several API processes reaping at once retry a job only once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import on_conflict_insert, transaction
from app.demos.service import LIVE, TERMINAL, add_event
from app.models import DemoJob, DemoJobEvent, DemoResult, DemoWorker, as_utc, utcnow
from contracts.jobs import BadMessage, JobQueue, job_body, verify

log = logging.getLogger(__name__)
REAP_EVERY_S = 1.0
PURGE_EVERY_S = 5.0


class DemoReports:
    """The drainer and reaper thread of one API process."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session], queue: JobQueue) -> None:
        self.settings, self.factory, self.queue = settings, factory, queue
        self.refused = 0
        self._next_purge = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-reports", daemon=True)

    def start(self) -> None:
        """Start draining and reaping."""
        self._thread.start()

    def stop(self) -> None:
        """Stop (the thread ends within a poll)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.queue.close()

    def _loop(self) -> None:
        next_reap = 0.0
        while not self._stop.is_set():
            try:
                drained = self.drain()
                if time.monotonic() >= next_reap:
                    self.reap()
                    next_reap = time.monotonic() + REAP_EVERY_S
            except Exception:
                log.exception("applying demo reports failed; retrying")
                drained = 0
                self._stop.wait(1.0)
            if not drained:
                self._stop.wait(0.1)

    # reports
    def drain(self, limit: int = 200) -> int:
        """Apply up to `limit` waiting reports; how many there were."""
        done = 0
        while done < limit:
            data = self.queue.next_report()
            if data is None:
                break
            done += 1
            try:
                body = verify(self.queue.token, data)
            except BadMessage as exc:
                self.refused += 1
                log.warning("refused a demo report: %s", exc)
                continue
            try:
                with transaction(self.factory) as session:
                    retry = self.apply(session, body)
            except Exception:
                log.exception("could not apply a %s report", body.get("type"))
                continue
            if retry is not None:
                self._requeue(*retry)
        return done

    def apply(self, session: Session, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """Apply one verified report; a job to put back on the queue, if the report retries one."""
        kind = body.get("type")
        worker_id = str(body.get("worker", ""))[:80]
        if kind == "heartbeat":
            self._heartbeat(session, worker_id, body)
            return None
        if kind == "bye":
            session.execute(update(DemoWorker).where(DemoWorker.id == worker_id).values(status="stopped"))
            return None
        job = session.get(DemoJob, str(body.get("job", "")), with_for_update=True)
        if job is None or job.attempt != body.get("attempt") or job.status in TERMINAL:
            return None
        if kind == "claimed":
            if job.status == "queued":
                job.status, job.worker_id, job.claimed_at = "claimed", worker_id, utcnow()
                job.hardware = body.get("hardware") or {}
            return None
        if job.worker_id != worker_id:
            return None  # not the worker this attempt belongs to
        if kind == "event":
            event = dict(body.get("event") or {})
            add_event(session, job.id, int(body.get("seq", 0)), event)
            if event.get("type") == "status" and event.get("status") == "running" and job.status != "running":
                job.status, job.started_at = "running", utcnow()
                if job.hardware is not None and event.get("placement"):
                    job.hardware = {**job.hardware, "placement": event["placement"]}
        elif kind == "state":
            job.pgid = body.get("pgid")
        elif kind == "dropped":
            cancelled = "cancelled" in str(body.get("reason", ""))
            self._finish(session, job, "cancelled" if cancelled else "failed", str(body.get("reason")), None)
        elif kind == "done":
            status = body.get("status") if body.get("status") in TERMINAL else "failed"
            job.pgid = body.get("pgid") or job.pgid
            self._finish(session, job, str(status), body.get("error"), body.get("result"))
        elif kind == "abandoned":
            return self.fail_or_retry(session, job, f"the worker {worker_id} stopped while the run was in progress")
        return None

    def _heartbeat(self, session: Session, worker_id: str, body: dict[str, Any]) -> None:
        now = utcnow()
        values = {
            "name": str(body.get("name", ""))[:64], "hardware": body.get("hardware") or {},
            "queues": [str(q)[:120] for q in body.get("queues") or []], "held": body.get("held") or [],
            "status": "stopping" if body.get("stopping") else "live", "last_seen": now,
        }
        stmt = on_conflict_insert(session, DemoWorker).values(id=worker_id, started_at=now, **values)
        session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_=values))
        for held in body.get("held") or []:
            if held.get("pgid"):
                session.execute(update(DemoJob).where(
                    DemoJob.id == held.get("job"), DemoJob.worker_id == worker_id, DemoJob.pgid.is_(None)
                ).values(pgid=held["pgid"]))

    def _finish(self, session: Session, job: DemoJob, status: str, error: str | None,
                result: dict[str, Any] | None) -> None:
        now = utcnow()
        job.status, job.error, job.finished_at, job.dedupe_key = status, error, now, None
        if status == "succeeded" and isinstance(result, dict):
            row = DemoResult(job_id=job.id, demo=job.demo, params_hash=job.params_hash, params=job.params,
                             kind=job.kind, hardware=job.hardware or {}, worker_id=job.worker_id, measured_at=now,
                             result=result)
            session.add(row)
            session.flush()
            job.result_id = row.id
        try:
            self.queue.forget(job.id)
        except Exception:  # a flag left behind is harmless
            log.debug("could not clear the cancellation flag of %s", job.id)

    # losing workers
    def fail_or_retry(self, session: Session, job: DemoJob, reason: str) -> tuple[str, dict[str, Any]] | None:
        """A live job whose worker is gone: retry it once if its learner is still waiting, else fail it."""
        now = utcnow()
        waiting = (now - as_utc(job.watched_at)).total_seconds() <= self.settings.demo_watch_s
        since = now - timedelta(seconds=self.settings.demo_worker_timeout_s)
        elsewhere = [w for w in session.scalars(select(DemoWorker).where(
            DemoWorker.status == "live", DemoWorker.last_seen >= since, DemoWorker.id != job.worker_id))
            if job.queue in w.queues]
        if job.attempt == 1 and waiting and elsewhere and not self.queue.revoked(job.id):
            last = session.scalar(select(DemoJobEvent.seq).where(DemoJobEvent.job_id == job.id)
                                  .order_by(DemoJobEvent.seq.desc()).limit(1)) or 0
            attempt, seq_base = job.attempt + 1, int(last) + 2
            changed = session.execute(update(DemoJob).where(
                DemoJob.id == job.id, DemoJob.attempt == job.attempt, DemoJob.status.in_(LIVE)).values(
                attempt=attempt, status="queued", worker_id=None, hardware=None, pgid=None, started_at=None,
                claimed_at=None, seq_base=seq_base,
                attempts=[*job.attempts, {"worker": job.worker_id, "error": reason}],
                expires_at=now + timedelta(seconds=self.settings.demo_queue_timeout_s)))
            if not getattr(changed, "rowcount", 0):
                return None
            add_event(session, job.id, seq_base - 1,
                      {"type": "status", "status": "retrying", "error": reason, "attempt": attempt})
            body = job_body(job_id=job.id, attempt=attempt, demo=job.demo, params=job.params,
                            world_size=job.world_size, kind=job.kind, seq_base=seq_base,
                            expires_at=(now + timedelta(seconds=self.settings.demo_queue_timeout_s)).timestamp())
            return job.queue, body
        session.execute(update(DemoJob).where(
            DemoJob.id == job.id, DemoJob.attempt == job.attempt, DemoJob.status.in_(LIVE)).values(
            status="failed", error=reason, finished_at=now, dedupe_key=None))
        return None

    def _requeue(self, queue: str, body: dict[str, Any]) -> None:
        try:
            self.queue.put_job(queue, body)
        except Exception:
            log.exception("could not put job %s back on the queue", body.get("job"))
            with transaction(self.factory) as session:
                session.execute(update(DemoJob).where(DemoJob.id == body["job"], DemoJob.status == "queued").values(
                    status="failed", error="the job queue could not be reached to retry the run",
                    finished_at=utcnow(), dedupe_key=None))

    def reap(self) -> None:
        """Lose workers whose heartbeats stopped (failing or retrying their jobs); fail jobs nobody took."""
        now = utcnow()
        timeout = timedelta(seconds=self.settings.demo_worker_timeout_s)
        retries: list[tuple[str, dict[str, Any]]] = []
        with transaction(self.factory) as session:
            lost = list(session.scalars(select(DemoWorker).where(
                DemoWorker.status.in_(("live", "stopping", "stopped")), DemoWorker.last_seen < now - timeout)))
            for worker in lost:
                session.execute(update(DemoWorker).where(DemoWorker.id == worker.id).values(status="lost"))
            gone = [w.id for w in lost] + list(session.scalars(select(DemoWorker.id).where(
                DemoWorker.status == "stopped")))
            if gone:
                jobs = session.scalars(select(DemoJob).where(DemoJob.worker_id.in_(gone),
                                                             DemoJob.status.in_(("claimed", "running"))))
                for job in list(jobs):
                    why = (f"the worker {job.worker_id} stopped answering (no heartbeat for "
                           f"{self.settings.demo_worker_timeout_s:g} s); the run was lost with it")
                    retry = self.fail_or_retry(session, job, why)
                    if retry is not None:
                        retries.append(retry)
            session.execute(update(DemoJob).where(DemoJob.status == "queued", DemoJob.expires_at < now).values(
                status="failed", error="no worker took the run in time", finished_at=now, dedupe_key=None))
            queues = {q for w in session.scalars(select(DemoWorker).where(DemoWorker.status == "live"))
                      for q in w.queues}
        for retry in retries:
            self._requeue(*retry)
        if time.monotonic() >= self._next_purge:
            self._next_purge = time.monotonic() + PURGE_EVERY_S
            self.purge(queues)

    def purge(self, queues: set[str]) -> int:
        """Drop messages at the heads of the queues that are not signed with the token (a forged job would
        otherwise block its queue: workers never take one). How many were dropped."""
        dropped = 0
        for name in sorted(queues):
            for _ in range(10):
                head = self.queue.head(name)
                if head is None:
                    break
                try:
                    verify(self.queue.token, head)
                    break
                except BadMessage:
                    taken = self.queue.take(name)
                    if taken is None:
                        break
                    try:
                        verify(self.queue.token, taken)
                    except BadMessage:
                        dropped += 1
                        log.warning("dropped a job on %s that is not signed with the worker token", name)
                        continue
                    self.queue.storage(name).enqueue(taken)  # a good job taken by mistake: back it goes (at the end)
                    break
        return dropped
