"""HTTP routes of live demos: the catalogue, runs (start, view, cancel, progress events) and results history.

Runs are records in the database; workers take their jobs from the shared queue. Any API process serves any
run: its events stream is read from the database. Starting, viewing and cancelling a run needs a learner's
chat token (`Authorization: Bearer ct_...`) or an API key (`X-API-Key`); a learner sees only their own runs,
a key with the author scope sees and cancels every run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.bank.repository import list_questions
from app.config import Settings
from app.db import transaction
from app.demos import service
from app.demos.service import TERMINAL, Requester
from app.deps import RuntimeDep, SessionDep
from app.errors import UnauthorizedError, UnavailableError
from app.keys.deps import RateLimiterDep, api_key_header, require_api_key
from app.models import ChatToken
from app.serving.admission import EventStream, open_stream
from app.serving.runtime import Runtime
from contracts import demo_params
from contracts.demos import DEMOS, SUMMARIES
from contracts.jobs import JobQueue

router = APIRouter(prefix="/v1/demos", tags=["demos"])
KEEP_ALIVE_S = 5.0
POLL_S = 0.25
CHAT_TOKEN_PREFIX = "ct_"

# A run id as the API makes them; anything else is refused here (422).
RunId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="a run id from POST /v1/demos/{name}/runs")]


def job_queue(request: Request) -> JobQueue:
    """The process's demo job queue (503 when live demos are not configured)."""
    queue: JobQueue | None = getattr(request.app.state, "demo_queue", None)
    if queue is None:
        raise UnavailableError("live demos are not configured on this server (TUTOR_WORKER_TOKEN is not set)",
                               retry_after=30)
    return queue


QueueDep = Annotated[JobQueue, Depends(job_queue)]


def learner_of(runtime: Runtime, token: str) -> str:
    """The learner a chat token belongs to (401 for an unknown one)."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    with transaction(runtime.factory) as session:
        row = session.get(ChatToken, digest) if token.startswith(CHAT_TOKEN_PREFIX) else None
        if row is None:
            raise UnauthorizedError("unknown chat token")
        return row.learner_id


async def requester(
    runtime: RuntimeDep,
    limiter: RateLimiterDep,
    secret: Annotated[str | None, Depends(api_key_header)] = None,
    authorization: Annotated[str | None, Header(max_length=200)] = None,
) -> Requester:
    """Who calls: an API key (checked and counted like every keyed call) or a learner's chat token; else 401."""
    if secret is not None:
        caller = await require_api_key(runtime, limiter, secret)
        return Requester("key", caller.id, "author" in caller.scopes)
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        learner = await run_in_threadpool(learner_of, runtime, token.strip())
        return Requester("learner", learner)
    raise UnauthorizedError(
        "live demos need a learner's chat token (Authorization: Bearer <token>) or an API key (X-API-Key)"
    )


RequesterDep = Annotated[Requester, Depends(requester)]


async def viewer(
    runtime: RuntimeDep,
    limiter: RateLimiterDep,
    secret: Annotated[str | None, Depends(api_key_header)] = None,
    authorization: Annotated[str | None, Header(max_length=200)] = None,
) -> Requester:
    """Who looks at a run; a caller without credentials owns no run, so every run id is 404 to them."""
    if secret is None and not authorization:
        return Requester("anonymous", "")
    return await requester(runtime, limiter, secret, authorization)


ViewerDep = Annotated[Requester, Depends(viewer)]


@router.get("")
def catalogue(session: SessionDep, runtime: RuntimeDep) -> dict[str, Any]:
    """The demos with their topics, related bank questions and parameters; 'available' says if a worker is live."""
    questions, _ = list_questions(session)
    demos = []
    for name, (title, topics) in DEMOS.items():
        demos.append({
            "name": name, "title": title, "topics": list(topics), "summary": SUMMARIES[name],
            "multi_rank": name in demo_params.MULTI_RANK, "params": demo_params.PARAMS[name].model_json_schema(),
            "question_ids": [q.id for q in questions if set(q.topics) & set(topics)][:20],
        })
    workers = service.catalogue_workers(session, runtime.settings)
    body: dict[str, Any] = {"available": bool(workers), "workers": workers, "demos": demos}
    if not workers:
        body["message"] = "no demo worker is connected; live demos are unavailable"
    return body


@router.get("/{name}/results")
def results(name: str, session: SessionDep, limit: Annotated[int, Query(ge=1, le=50)] = 10) -> dict[str, Any]:
    """Recent measurements of a demo per hardware kind (where and when each was measured, its figures)."""
    return service.results(session, name, limit)


@router.post("/{name}/runs", status_code=status.HTTP_202_ACCEPTED)
async def start_run(
    name: str,
    response: Response,
    runtime: RuntimeDep,
    who: RequesterDep,
    limiter: RateLimiterDep,
    queue: QueueDep,
    params: Annotated[dict[str, Any] | None, Body()] = None,
    fresh: Annotated[bool, Query(description="run again even if a recent result exists")] = False,
) -> dict[str, Any]:
    """Run a demo: 202 with a queued (or joined) run, 200 with a recent result reused (see `reused`).

    4xx: 404 unknown demo, 422 bad parameters, over the cost budget or no worker can place them, 429 the
    requester already has a live run or the queue is full; 503 no worker is connected.
    """
    settings: Settings = runtime.settings
    await run_in_threadpool(limiter.hit_anonymous, "demo", f"{who.kind}:{who.id}", settings.demo_rate_limit)

    def start() -> dict[str, Any]:
        with transaction(runtime.factory) as session:
            started = service.start_run(session, settings, who, name, params, fresh=fresh)
        service.enqueue(queue, runtime.factory, started)
        return started.view

    view = await run_in_threadpool(start)
    if view["status"] in TERMINAL:
        response.status_code = status.HTTP_200_OK
    return view


@router.get("/runs/{run_id}")
def get_run(run_id: RunId, who: ViewerDep, session: SessionDep) -> dict[str, Any]:
    """A run's status, queue position, where it runs, and once finished its figures, series and charts (SVG)."""
    run, job = service.owned_run(session, who, run_id)
    service.watch(session, job)
    return service.view(session, run, job)


@router.delete("/runs/{run_id}")
def cancel_run(run_id: RunId, who: ViewerDep, session: SessionDep, queue: QueueDep) -> dict[str, Any]:
    """Cancel a run (the requester's own, or any with an author key); its processes are ended."""
    return service.cancel(session, queue, who, run_id)


def _sse(kind: str, data: dict[str, Any], seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, default=str)}\n\n"


def _poll(runtime: Runtime, who: Requester, run_id: str, after: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with transaction(runtime.factory) as session:
        run, job = service.owned_run(session, who, run_id)
        service.watch(session, job)
        events = service.events_after(session, job.id, after)
        current = service.view(session, run, job, with_result=False)
        if current["status"] in TERMINAL:
            current = service.view(session, run, job)
        return events, current


async def _stream(runtime: Runtime, who: Requester, run_id: str, after: int,
                  disconnected: Callable[[], Any]) -> AsyncIterator[str]:
    idle = 0.0
    while True:
        events, current = await run_in_threadpool(_poll, runtime, who, run_id, after)
        for event in events:
            after = event["seq"]
            yield _sse(str(event.get("type", "status")), event, after)
        if current["status"] in TERMINAL:
            done = {"type": "done", "status": current["status"], "error": current["error"],
                    "result": current["result"], "reused": current["reused"], "measured": current["measured"],
                    "hardware": current["hardware"]}
            yield _sse("done", done)
            return
        if events:
            idle = 0.0
        elif idle >= KEEP_ALIVE_S:
            yield ": keep-alive\n\n"
            idle = 0.0
        if await disconnected():
            return
        await asyncio.sleep(POLL_S)
        idle += POLL_S


@router.get("/runs/{run_id}/events")
def run_events(
    request: Request,
    run_id: RunId,
    who: ViewerDep,
    runtime: RuntimeDep,
    session: SessionDep,
    after: int = -1,
    last_event_id: Annotated[int | None, Header()] = None,
) -> StreamingResponse:
    """Server-sent events read from the run's record: status, progress, and a final `done` with the result.

    Served by any API process, whichever worker runs the job. An open stream counts against the open-stream
    bounds, not the request limit (429 or 503 beyond them).
    """
    service.owned_run(session, who, run_id)  # 404 before the stream starts
    settings: Settings = runtime.settings
    ticket = open_stream(request, settings.max_open_streams, settings.max_open_streams_per_client)
    start = last_event_id if last_event_id is not None else after
    return EventStream(ticket, _stream(runtime, who, run_id, start, request.is_disconnected))
