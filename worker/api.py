"""The worker's HTTP service: health, and local runs on this host (catalogue, submit, status, cancel, events).

The tutor's API never calls it: learners' runs come from the shared job queue (`worker.consumer`, started in
the lifespan when TUTOR_WORKER_QUEUE_URL is set) and share this worker's devices, in one FIFO, with local runs.
Every /v1 route requires the shared token (`Authorization: Bearer $TUTOR_WORKER_TOKEN`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Header, Request, status
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError

from contracts.errors import InvalidParamsError, NotFoundError, UnauthorizedError
from contracts.http import install_error_handlers
from contracts.openapi import complete_worker_openapi
from worker.catalogue import CATALOGUE
from worker.devices import DeviceInfo, detect
from worker.runs import Executor, RunQueue
from worker.settings import WorkerSettings

HEARTBEAT_S = 5.0
bearer = HTTPBearer(auto_error=False)


def get_queue(request: Request) -> RunQueue:
    """The worker's run queue, built in the lifespan."""
    queue: RunQueue = request.app.state.queue
    return queue


QueueDep = Annotated[RunQueue, Depends(get_queue)]


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None
) -> None:
    """401 unless the request carries the worker's shared token."""
    expected: str = request.app.state.token
    given = credentials.credentials if credentials else ""
    if not secrets.compare_digest(given.encode(), expected.encode()):
        raise UnauthorizedError("missing or wrong worker token (Authorization: Bearer $TUTOR_WORKER_TOKEN)")


router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)], tags=["worker"])


@router.get("/info")
def info(request: Request, queue: QueueDep) -> dict[str, Any]:
    """The worker's devices, boot id and queue occupancy."""
    consumer = getattr(request.app.state, "consumer", None)
    return {"boot": queue.boot, "devices": queue.info.as_dict(), "queue": queue.stats(),
            "worker_id": consumer.id if consumer else None}


@router.get("/demos")
def demos(queue: QueueDep) -> dict[str, Any]:
    """The demo catalogue with each demo's parameter schema."""
    return {"demos": [demo.describe() for demo in CATALOGUE.values()], "devices": queue.info.as_dict()}


def _fields(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]} for err in exc.errors()]


@router.post("/demos/{name}/runs", status_code=status.HTTP_202_ACCEPTED)
def submit(name: str, queue: QueueDep, body: Annotated[dict[str, Any] | None, Body()] = None) -> dict[str, Any]:
    """Validate the parameters and queue a run (422 bad parameters, 429 queue full)."""
    demo = CATALOGUE.get(name)
    if demo is None:
        raise NotFoundError(f"no demo {name!r}; see GET /v1/demos")
    try:
        params = demo.params.model_validate(body or {})
    except ValidationError as exc:
        fields = _fields(exc)
        names = ", ".join(f["field"] or "params" for f in fields)
        raise InvalidParamsError(f"invalid {names}", details={"fields": fields}) from exc
    return queue.view(queue.submit(demo, params))


@router.get("/runs/{run_id}")
def get_run(run_id: str, queue: QueueDep) -> dict[str, Any]:
    """A run's state, queue position and (once finished) result."""
    return queue.view(queue.get(run_id))


@router.delete("/runs/{run_id}")
def cancel_run(run_id: str, queue: QueueDep) -> dict[str, Any]:
    """Cancel a run: a queued one at once, a running one by ending its process group."""
    return queue.view(queue.cancel(run_id), with_result=False)


def sse(event: dict[str, Any]) -> str:
    """One server-sent event: id (the event's seq), event type and JSON data."""
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n"


async def _stream(queue: RunQueue, run_id: str, after: int, disconnected: Callable[[], Any]) -> AsyncIterator[str]:
    run = queue.get(run_id)
    idle = 0.0
    while True:
        events = queue.events_after(run, after)
        for event in events:
            yield sse(event)
            after = event["seq"]
            if event["type"] == "done":
                return
        if events:
            idle = 0.0
        elif idle >= HEARTBEAT_S:
            yield ": keep-alive\n\n"
            idle = 0.0
        if await disconnected():
            return
        await asyncio.sleep(0.1)
        idle += 0.1


@router.get("/runs/{run_id}/events")
async def run_events(
    run_id: str,
    request: Request,
    queue: QueueDep,
    after: int = -1,
    last_event_id: Annotated[int | None, Header()] = None,
) -> StreamingResponse:
    """Server-sent events: status changes, progress, and a final `done` carrying the result."""
    queue.get(run_id)  # 404/410 before the stream starts
    start = last_event_id if last_event_id is not None else after
    return StreamingResponse(
        _stream(queue, run_id, start, request.is_disconnected),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def create_worker_app(
    settings: WorkerSettings | None = None, *, info: DeviceInfo | None = None, execute: Executor | None = None
) -> FastAPI:
    """Build the worker service; refuses to build without a token."""
    settings = settings or WorkerSettings()
    if not settings.token:
        raise RuntimeError("TUTOR_WORKER_TOKEN must be set: the worker only accepts requests carrying it")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from worker.supervisor import execute as run_process

        devices = info or detect(settings.device, settings.cpu_ranks, settings.gpus)
        queue = RunQueue(settings, devices, execute or run_process)
        consumer = None
        if settings.queue_url:  # jobs from the shared queue, beside local runs over HTTP
            from contracts.jobs import JobQueue
            from worker.consumer import Consumer

            consumer = Consumer(settings, queue, JobQueue(settings.queue_url, settings.token or ""), devices)
            queue.listener = consumer.listen
        queue.start()
        if consumer is not None:
            consumer.start()
        app.state.queue = queue
        app.state.consumer = consumer
        yield
        if consumer is not None:
            consumer.stopping()
        queue.stop()
        if consumer is not None:
            consumer.stop()

    app = FastAPI(title="GPU Tutor demo worker", version="0.1.0", lifespan=lifespan)
    app.state.token = settings.token
    install_error_handlers(app)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """The process is up (no token needed)."""
        return {"status": "ok"}

    app.include_router(router)
    complete_worker_openapi(app)  # every error each operation answers, in the document; 405s list every method
    return app
