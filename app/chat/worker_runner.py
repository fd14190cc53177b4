"""The chat's demo runner: runs go through the demos service (records in the database, jobs on the queue)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.demos import service
from app.demos.service import TERMINAL, Requester
from app.errors import NotFoundError, UnavailableError
from app.models import DemoJob, DemoRun
from contracts.jobs import JobQueue

POLL_S = 0.25


class QueueDemoRunner:
    """Starts runs for the conversation's learner, follows their recorded events and maps the result."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session], queue: JobQueue | None) -> None:
        self.settings, self.factory, self.queue = settings, factory, queue

    def start(self, name: str, params: dict[str, Any], *, learner_id: str | None = None, fresh: bool = False) -> str:
        """Start (or join, or reuse) a run for the learner; UnavailableError etc. when it can't."""
        if self.queue is None:
            raise UnavailableError("live demos are not configured on this server")
        if learner_id is None:
            raise UnavailableError("a demo run needs a learner")
        with transaction(self.factory) as session:
            started = service.start_run(session, self.settings, Requester("learner", learner_id), name, params,
                                        fresh=fresh)
        service.enqueue(self.queue, self.factory, started)
        return str(started.view["id"])

    def _state(self, run_id: str, after: int) -> tuple[list[dict[str, Any]], DemoJob, DemoRun]:
        with transaction(self.factory) as session:
            run = session.get(DemoRun, run_id)
            job = session.get(DemoJob, run.job_id) if run is not None else None
            if run is None or job is None:
                raise NotFoundError(f"no run {run_id!r}")
            service.watch(session, job)
            return service.events_after(session, job.id, after), job, run

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """Progress events until the run ends (read from its record)."""
        after = -1
        while True:
            events, job, run = self._state(run_id, after)
            for event in events:
                after = event["seq"]
                yield _progress(event)
            if service.run_status(run, job) in TERMINAL:
                return
            time.sleep(POLL_S)

    def result(self, run_id: str) -> dict[str, Any]:
        """The finished run as the chat shows it: status, where and when it was measured, series, first chart."""
        with transaction(self.factory) as session:
            run = session.get(DemoRun, run_id)
            job = session.get(DemoJob, run.job_id) if run is not None else None
            if run is None or job is None:
                raise NotFoundError(f"no run {run_id!r}")
            view = service.view(session, run, job)
        result = view.get("result") or {}
        charts = result.get("charts") or []
        measured = view.get("measured") or {}
        return {
            "status": view.get("status"),
            "error": view.get("error"),
            "answer": view.get("answer"),
            "measured": measured.get("message"),
            "summary": f"Ran with {view['world_size']} rank(s): {(view.get('hardware') or {}).get('label', '')}."
            if view.get("hardware") else None,
            "series": result.get("series") or [],
            "chart": charts[0] if charts else None,
        }


def _progress(event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") == "status":
        position = event.get("position")
        status = str(event.get("status", "running"))
        message = f"queued (position {position})" if position else status
        if status == "retrying":
            message = f"retrying on another worker: {event.get('error')}"
        return {"status": status, "message": message, "fraction": None}
    return {"status": "running", "message": event.get("message") or "running", "fraction": event.get("fraction")}
