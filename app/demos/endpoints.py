"""HTTP routes of live demos: the catalogue, runs and their progress, proxied to the demo worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Body, Depends, Header, Path, Request, status
from fastapi.responses import StreamingResponse

from app.bank.repository import list_questions
from app.config import Settings
from app.demos.client import RunLost, WorkerClient
from app.deps import RuntimeDep, SessionDep
from app.errors import NotFoundError, TutorError
from app.serving.admission import EventStream, open_stream
from contracts.demos import DEMOS

router = APIRouter(prefix="/v1/demos", tags=["demos"])


def get_worker(runtime: RuntimeDep) -> WorkerClient:
    """A client of the configured demo worker."""
    settings: Settings = runtime.settings
    return WorkerClient(settings)


WorkerDep = Annotated[WorkerClient, Depends(get_worker)]


# A run id as the worker makes them; anything else is refused here (422) and never put into a worker URL.
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="a run id from POST /v1/demos/{name}/runs")]


def _lost(run_id: str, message: str) -> dict[str, Any]:
    return {"id": run_id, "status": "failed", "error": message or "the demo worker restarted; the run was lost"}


def _run_request(worker: WorkerClient, method: str, run_id: str) -> dict[str, Any]:
    """A call about one run, relayed; a run the worker lost in a restart is reported as failed."""
    try:
        result: dict[str, Any] = worker.request(method, f"/v1/runs/{run_id}")
    except RunLost as exc:
        return _lost(run_id, str(exc))
    return result


@router.get("")
def catalogue(worker: WorkerDep, session: SessionDep) -> dict[str, Any]:
    """The demos with their topics, related bank questions and parameters; 'available' says if the worker answers."""
    questions, _ = list_questions(session)
    entries: dict[str, dict[str, Any]] = {
        name: {"name": name, "title": title, "topics": list(topics), "params": None}
        for name, (title, topics) in DEMOS.items()
    }
    for entry in entries.values():
        entry["question_ids"] = [q.id for q in questions if set(q.topics) & set(entry["topics"])][:20]
    try:
        remote = worker.request("GET", "/v1/demos")
    except TutorError as exc:
        return {"available": False, "message": exc.message, "demos": list(entries.values())}
    for demo in remote["demos"]:
        if demo["name"] in entries:
            entries[demo["name"]].update(summary=demo["summary"], params=demo["params"], multi_rank=demo["multi_rank"])
    return {"available": True, "devices": remote.get("devices"), "demos": list(entries.values())}


@router.post("/{name}/runs", status_code=status.HTTP_202_ACCEPTED)
def start_run(name: str, worker: WorkerDep, params: Annotated[dict[str, Any] | None, Body()] = None) -> dict[str, Any]:
    """Queue a run of a demo with optional parameters (422 bad parameters, 429 queue full, 503 worker down)."""
    if name not in DEMOS:
        raise NotFoundError(f"no demo {name!r}; see GET /v1/demos")
    result: dict[str, Any] = worker.request("POST", f"/v1/demos/{name}/runs", json=params or {})
    return result


@router.get("/runs/{run_id}")
def get_run(run_id: RunId, worker: WorkerDep) -> dict[str, Any]:
    """A run's status, queue position, and once finished its figures, series and charts (SVG)."""
    return _run_request(worker, "GET", run_id)


@router.delete("/runs/{run_id}")
def cancel_run(run_id: RunId, worker: WorkerDep) -> dict[str, Any]:
    """Cancel a queued or running run (its processes are ended)."""
    return _run_request(worker, "DELETE", run_id)


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


async def _relay(worker: WorkerClient, run_id: str, after: int) -> AsyncIterator[str]:
    finished = False
    try:
        async for line in worker.stream(run_id, after):
            finished = finished or line == "event: done"
            yield line + "\n"
    except (httpx.HTTPError, TutorError, RunLost):
        pass
    if not finished:
        # the worker went away mid-run: its run processes die with it, so the run has failed
        message = "lost the demo worker while the run was in progress; the run has failed"
        yield _event("done", {"type": "done", "status": "failed", "error": message, "result": None})


@router.get("/runs/{run_id}/events")
def run_events(
    request: Request,
    run_id: RunId,
    worker: WorkerDep,
    runtime: RuntimeDep,
    after: int = -1,
    last_event_id: Annotated[int | None, Header()] = None,
) -> StreamingResponse:
    """Server-sent events relayed from the worker: status, progress, and a final `done` with the result.

    An open stream counts against the open-stream bounds, not the request limit (429 or 503 beyond them).
    """
    settings: Settings = runtime.settings
    ticket = open_stream(request, settings.max_open_streams, settings.max_open_streams_per_client)
    try:
        worker.request("GET", f"/v1/runs/{run_id}")  # 404 / 503 as JSON before the stream starts
    except RunLost as exc:
        body = _event("done", {"type": "done", **_lost(run_id, str(exc)), "result": None})
        return EventStream(ticket, iter([body]))
    start = last_event_id if last_event_id is not None else after
    return EventStream(ticket, _relay(worker, run_id, start))
