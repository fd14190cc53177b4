"""Live demo runs as durable records: who asked, which job answers them, where and when it was measured.

A *job* is one execution of a demo with given parameters on a kind of hardware ('cpu', or 'cuda_<gpu model>');
a *run* is one requester's request, answered by a fresh job, by joining an identical job still live, or by
reusing a recent job's result. Jobs go on the queue of their placement class (contracts.jobs.queue_name);
workers report back and `app.demos.reports` applies the reports here.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import end_reads
from app.errors import InvalidParamsError, NotFoundError, QueueFullError, RateLimitedError, UnavailableError
from app.models import DemoJob, DemoJobEvent, DemoResult, DemoRun, DemoWorker, as_utc, utcnow
from contracts import demo_params
from contracts.demos import DEMOS
from contracts.jobs import JobQueue, job_body, queue_name

LIVE = ("queued", "claimed", "running")
TERMINAL = ("succeeded", "failed", "cancelled")
RETRY_AFTER_S = 5


@dataclass(frozen=True)
class Requester:
    """Who asks: a learner (chat token) or an API key; keys with the author scope see and cancel every run."""

    kind: str  # learner, key
    id: str
    author: bool = False


@dataclass
class Started:
    """A run request's answer: the run's view, and whether a job was queued (202) or the answer is ready."""

    view: dict[str, Any]
    job_to_queue: dict[str, Any] | None = None
    queue: str | None = None


def _fields(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]} for err in exc.errors()]


def _size(n: float) -> str:
    for unit in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
        if abs(n) < 1024:
            return f"{n:.1f} {unit}B".replace(".0 ", " ")
        n /= 1024
    return f"{n:.1f} EiB"


def validate(name: str, body: dict[str, Any] | None, settings: Settings, requester: Requester
             ) -> tuple[demo_params.DemoParams, int, int]:
    """The parameters (404 unknown demo, 422 invalid or over budget), their world size and cost."""
    model = demo_params.PARAMS.get(name)
    if model is None:
        raise NotFoundError(f"no demo {name!r}; see GET /v1/demos", details={"demo": name})
    try:
        params = model.model_validate(body or {})
    except ValidationError as exc:
        fields = _fields(exc)
        names = ", ".join(f["field"] or "params" for f in fields)
        raise InvalidParamsError(f"invalid {names}", details={"fields": fields}) from exc
    if params.time_limit_s > settings.demo_max_time_limit_s:
        raise InvalidParamsError(
            f"time_limit_s must be at most {settings.demo_max_time_limit_s}",
            details={"fields": [{"field": "time_limit_s", "message": "over the server's limit"}]},
        )
    cost = demo_params.cost(name, params)
    budget = settings.demo_author_cost_budget if requester.author else settings.demo_cost_budget
    if cost > budget:
        raise InvalidParamsError(
            f"these parameters cost {_size(cost)}·iterations (bytes × iterations × ranks), over the budget of "
            f"{_size(budget)}·iterations per run: use fewer bytes, iterations or ranks",
            details={"cost": cost, "budget": budget, "fields": [{"field": "params", "message": "over budget"}]},
        )
    return params, demo_params.world_size(name, params), cost


def params_hash(params: dict[str, Any]) -> str:
    """A stable hash of canonical parameters (every default filled in)."""
    return hashlib.sha256(json.dumps(params, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def live_workers(session: Session, settings: Settings) -> list[DemoWorker]:
    """Workers heard from within the heartbeat timeout."""
    since = utcnow() - timedelta(seconds=settings.demo_worker_timeout_s)
    return list(session.scalars(select(DemoWorker).where(DemoWorker.status == "live", DemoWorker.last_seen >= since)))


def capacity(workers: list[DemoWorker]) -> dict[str, int]:
    """Per hardware kind, the largest run (ranks) a live worker can place."""
    found: dict[str, int] = {}
    for worker in workers:
        for queue in worker.queues:
            kind, _, size = queue.removeprefix("demo_").rpartition("_")
            if size.isdigit():
                found[kind] = max(found.get(kind, 0), int(size))
    return found


def choose_kind(session: Session, settings: Settings, world_size: int) -> str:
    """The hardware kind a run of `world_size` ranks goes to: GPUs when a live worker has enough, else CPU.

    503 when no worker is connected; 422 when none can place that many ranks.
    """
    workers = live_workers(session, settings)
    if not workers:
        raise UnavailableError("no demo worker is connected; live demos are unavailable, try again shortly",
                               retry_after=RETRY_AFTER_S)
    sizes = capacity(workers)
    fits = [kind for kind, size in sizes.items() if size >= world_size]
    if not fits:
        offered = ", ".join(f"{kind}: {size}" for kind, size in sorted(sizes.items()))
        raise InvalidParamsError(
            f"no connected worker can place {world_size} ranks (largest runs offered: {offered})",
            details={"world_size": world_size, "capacity": sizes,
                     "fields": [{"field": "world_size", "message": "no worker can place it"}]},
        )
    gpu = sorted((k for k in fits if k != "cpu"), key=lambda k: (-sum(q.startswith(f"demo_{k}_")
                                                                      for w in workers for q in w.queues), k))
    return gpu[0] if gpu else "cpu"


def _age(seconds: float) -> str:
    if seconds < 60:
        return "just now" if seconds < 5 else f"{int(seconds)} seconds ago"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''} ago"
    hours = minutes // 60
    return f"{hours} hour{'s' if hours != 1 else ''} ago"


def measured(result: DemoResult | None, job: DemoJob, now: datetime | None = None) -> dict[str, Any] | None:
    """When and where a result was measured, with a sentence such as 'measured 4 minutes ago on 8 × H100'."""
    if result is None:
        return None
    hardware = result.hardware or {}
    age = ((now or utcnow()) - as_utc(result.measured_at)).total_seconds()
    label = hardware.get("label") or result.kind
    return {
        "measured_at": as_utc(result.measured_at).isoformat(),
        "age_s": round(age, 1),
        "hardware": hardware,
        "worker": result.worker_id,
        "message": f"measured {_age(age)} on {label}",
    }


def _epoch(moment: datetime | None) -> float | None:
    return as_utc(moment).timestamp() if moment is not None else None


def position(session: Session, job: DemoJob) -> int | None:
    """1 for the next job of its queue to be taken, 2 for the one after...; None once a worker has it."""
    if job.status != "queued":
        return None
    ahead = session.scalar(select(func.count()).select_from(DemoJob).where(
        DemoJob.queue == job.queue, DemoJob.status == "queued", DemoJob.created_at < job.created_at))
    return int(ahead or 0) + 1


def run_status(run: DemoRun, job: DemoJob) -> str:
    """What the requester sees: 'claimed' (a worker waits for its devices) shows as 'queued'."""
    if run.cancelled_at is not None and job.status not in TERMINAL:
        return "cancelled"
    if run.cancelled_at is not None and job.status == "succeeded" and run.answer != "reused":
        return "cancelled"
    return "queued" if job.status == "claimed" else job.status


def view(session: Session, run: DemoRun, job: DemoJob, *, with_result: bool = True) -> dict[str, Any]:
    """The JSON shape clients see for a run."""
    status = run_status(run, job)
    result = session.get(DemoResult, job.result_id) if job.result_id is not None else None
    hardware = job.hardware or {}
    reused = None
    if run.answer in ("reused", "shared"):
        reused = {"how": "recent" if run.answer == "reused" else "live", "job": job.id}
        if run.answer == "reused":
            reused.update(measured(result, job) or {})
        else:
            reused["message"] = "joined an identical run already in progress"
    count = session.scalar(select(func.count()).select_from(DemoJobEvent).where(DemoJobEvent.job_id == job.id))
    return {
        "id": run.id,
        "demo": job.demo,
        "status": status,
        "answer": run.answer,
        "reused": reused,
        "measured": measured(result, job) if status == "succeeded" else None,
        "position": position(session, job) if status == "queued" else None,
        "params": job.params,
        "world_size": job.world_size,
        "hardware_kind": job.kind,
        "backend": hardware.get("backend"),
        "hardware": hardware or None,
        "worker": job.worker_id,
        "attempt": job.attempt,
        "attempts": job.attempts,
        "created_at": _epoch(run.created_at),
        "started_at": _epoch(job.started_at),
        "finished_at": _epoch(job.finished_at),
        "error": "cancelled by request" if run.cancelled_at is not None and status == "cancelled"
        else job.error if status in ("failed", "cancelled") else None,
        "pgid": job.pgid,
        "events": int(count or 0),
        "result": result.result if (result is not None and with_result and status == "succeeded") else None,
    }


def add_event(session: Session, job_id: str, seq: int, data: dict[str, Any]) -> None:
    """Record an event once (a repeated seq is ignored)."""
    from app.db import on_conflict_insert

    stmt = on_conflict_insert(session, DemoJobEvent).values(
        job_id=job_id, seq=seq, type=str(data.get("type", "status"))[:16], data=data, created_at=utcnow()
    ).on_conflict_do_nothing(index_elements=["job_id", "seq"])
    session.execute(stmt)


def _live_started(session: Session, requester: Requester) -> int:
    return int(session.scalar(
        select(func.count()).select_from(DemoRun).join(DemoJob, DemoJob.id == DemoRun.job_id).where(
            DemoRun.requester_id == requester.id, DemoRun.answer == "fresh", DemoRun.cancelled_at.is_(None),
            DemoJob.status.in_(LIVE))) or 0)


def _new_run(session: Session, job: DemoJob, requester: Requester, answer: str) -> DemoRun:
    run = DemoRun(id="r_" + secrets.token_hex(8), job_id=job.id, requester_kind=requester.kind,
                  requester_id=requester.id, answer=answer, created_at=utcnow())
    session.add(run)
    session.flush()
    return run


def start_run(session: Session, settings: Settings, requester: Requester, name: str, body: dict[str, Any] | None,
              *, fresh: bool = False) -> Started:
    """Answer a run request: a recent result (reused), an identical live job (joined), or a new queued job."""
    params, world_size, cost = validate(name, body, settings, requester)
    canonical = params.model_dump(mode="json")
    digest = params_hash(canonical)
    kind = choose_kind(session, settings, world_size)
    dedupe = hashlib.sha256(f"{name}|{digest}|{kind}".encode()).hexdigest()
    now = utcnow()
    if not fresh and settings.demo_reuse_s > 0:
        since = now - timedelta(seconds=settings.demo_reuse_s)
        recent = session.scalars(select(DemoResult).where(
            DemoResult.demo == name, DemoResult.params_hash == digest, DemoResult.kind == kind,
            DemoResult.measured_at >= since).order_by(DemoResult.measured_at.desc()).limit(1)).first()
        if recent is not None:
            job = session.get(DemoJob, recent.job_id)
            if job is not None:
                end_reads(session)
                return Started(view(session, _new_run(session, job, requester, "reused"), job))
    live = session.scalars(select(DemoJob).where(DemoJob.dedupe_key == dedupe)).first()
    if live is not None:
        end_reads(session)
        return Started(view(session, _new_run(session, live, requester, "shared"), live))
    limit = settings.demo_max_live_per_learner if requester.kind == "learner" else settings.demo_max_live_per_key
    if _live_started(session, requester) >= limit:
        who = "you already have" if requester.kind == "learner" else f"API key {requester.id} already has"
        raise RateLimitedError(f"{who} {limit} live demo run(s): wait for it to finish or cancel it",
                               retry_after=RETRY_AFTER_S, details={"limit": limit})
    queue = queue_name(kind, world_size)
    waiting = int(session.scalar(select(func.count()).select_from(DemoJob).where(
        DemoJob.queue == queue, DemoJob.status == "queued")) or 0)
    if waiting >= settings.demo_max_queue:
        raise QueueFullError(f"the demo queue for {world_size} rank(s) on {kind} is full ({waiting} waiting); "
                             "try again shortly", retry_after=RETRY_AFTER_S,
                             details={"queue": queue, "waiting": waiting, "max_queue": settings.demo_max_queue})
    end_reads(session)
    job = DemoJob(
        id="j_" + secrets.token_hex(8), demo=name, params=canonical, params_hash=digest, kind=kind, queue=queue,
        world_size=world_size, cost=cost, dedupe_key=dedupe, status="queued", attempt=1, attempts=[], seq_base=1,
        created_at=now, expires_at=now + timedelta(seconds=settings.demo_queue_timeout_s), watched_at=now,
    )
    try:
        with session.begin_nested():
            session.add(job)
            session.flush()
    except IntegrityError:  # an identical request won the race: join its job
        live = session.scalars(select(DemoJob).where(DemoJob.dedupe_key == dedupe)).first()
        if live is None:
            raise UnavailableError("could not queue the run; try again", retry_after=1) from None
        return Started(view(session, _new_run(session, live, requester, "shared"), live))
    run = _new_run(session, job, requester, "fresh")
    add_event(session, job.id, 0, {"type": "status", "status": "queued", "position": waiting + 1})
    body_ = job_body(job_id=job.id, attempt=1, demo=name, params=canonical, world_size=world_size, kind=kind,
                     seq_base=1, expires_at=job.expires_at.timestamp())
    return Started(view(session, run, job), body_, queue)


def enqueue(queue: JobQueue, factory: Callable[[], Session], started: Started) -> None:
    """Put a new job on its queue once its records are committed; a queue that is down fails the job (503)."""
    if started.job_to_queue is None or started.queue is None:
        return
    try:
        queue.put_job(started.queue, started.job_to_queue)
    except Exception as exc:
        session = factory()
        try:
            session.execute(update(DemoJob).where(DemoJob.id == started.job_to_queue["job"]).values(
                status="failed", error="the job queue could not be reached", dedupe_key=None, finished_at=utcnow()))
            session.commit()
        finally:
            session.close()
        raise UnavailableError("the demo job queue cannot be reached; try again shortly",
                               retry_after=RETRY_AFTER_S) from exc


def owned_run(session: Session, requester: Requester, run_id: str) -> tuple[DemoRun, DemoJob]:
    """A run the requester may see: their own, or any with an author key (404 otherwise, as for no run)."""
    run = session.get(DemoRun, run_id)
    if run is None or requester.kind == "anonymous" or (run.requester_id != requester.id and not requester.author):
        raise NotFoundError(f"no run {run_id!r}", details={"id": run_id})
    job = session.get(DemoJob, run.job_id)
    if job is None:
        raise NotFoundError(f"no run {run_id!r}", details={"id": run_id})
    return run, job


def watch(session: Session, job: DemoJob) -> None:
    """Note that someone is waiting for the job (a worker loss then retries it), at most every 2 s."""
    now = utcnow()
    if job.status in LIVE and (now - as_utc(job.watched_at)).total_seconds() > 2:
        session.execute(update(DemoJob).where(DemoJob.id == job.id).values(watched_at=now))


def cancel(session: Session, queue: JobQueue, requester: Requester, run_id: str) -> dict[str, Any]:
    """Cancel a run; its job too when no other live request waits for it (a queued job at once, a running one
    by flagging it: its worker ends the run's process group)."""
    run, job = owned_run(session, requester, run_id)
    if run.cancelled_at is None and job.status in LIVE:
        run.cancelled_at = utcnow()
        session.flush()
        others = session.scalar(select(func.count()).select_from(DemoRun).where(
            DemoRun.job_id == job.id, DemoRun.cancelled_at.is_(None)))
        if not others:
            queue.revoke(job.id)
            if job.status == "queued":
                session.execute(update(DemoJob).where(DemoJob.id == job.id, DemoJob.status == "queued").values(
                    status="cancelled", error="cancelled by request", dedupe_key=None, finished_at=utcnow()))
                session.refresh(job)
    return view(session, run, job, with_result=False)


def events_after(session: Session, job_id: str, after: int) -> list[dict[str, Any]]:
    """A job's recorded events with seq > after, in order."""
    rows = session.scalars(select(DemoJobEvent).where(DemoJobEvent.job_id == job_id, DemoJobEvent.seq > after)
                           .order_by(DemoJobEvent.seq))
    return [{**row.data, "seq": row.seq} for row in rows]


def results(session: Session, name: str, limit: int) -> dict[str, Any]:
    """Recent measurements of a demo, grouped by hardware kind, newest first."""
    if name not in DEMOS:
        raise NotFoundError(f"no demo {name!r}; see GET /v1/demos", details={"demo": name})
    rows = session.scalars(select(DemoResult).where(DemoResult.demo == name)
                           .order_by(DemoResult.measured_at.desc()).limit(limit * 10))
    kinds: dict[str, dict[str, Any]] = {}
    now = utcnow()
    for row in rows:
        group = kinds.setdefault(row.kind, {"kind": row.kind, "results": []})
        if len(group["results"]) >= limit:
            continue
        group.setdefault("hardware", row.hardware.get("label"))
        figures = row.result.get("figures") if isinstance(row.result, dict) else None
        group["results"].append({
            "params": row.params, "hardware": row.hardware, "worker": row.worker_id,
            "measured_at": as_utc(row.measured_at).isoformat(),
            "message": f"measured {_age((now - as_utc(row.measured_at)).total_seconds())} on "
                       f"{row.hardware.get('label') or row.kind}",
            "figures": figures,
        })
    return {"demo": name, "kinds": list(kinds.values())}


def catalogue_workers(session: Session, settings: Settings) -> list[dict[str, Any]]:
    """The live workers as clients may see them: hardware and the largest runs they place."""
    out = []
    for worker in live_workers(session, settings):
        out.append({"id": worker.id, "name": worker.name, "hardware": worker.hardware,
                    "capacity": capacity([worker]), "busy": len(worker.held)})
    return out
