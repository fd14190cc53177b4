"""HTTP routes of the public grading API (X-API-Key)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pydantic_core
from fastapi import APIRouter, status
from fastapi.responses import JSONResponse
from sqlalchemy import Connection, insert
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.deps import RuntimeDep, SessionDep
from app.errors import UnavailableError
from app.grade_api.schemas import BatchIn, GradeIn, RubricIn
from app.grade_api.service import grade_items, load_rubric, prepare_items, register_rubric
from app.keys.deps import ApiKeyDep, RateLimiterDep, UncountedApiKeyDep, charge, count_usage
from app.keys.service import Caller, add_usage
from app.models import Attempt
from app.serving.aio import encode_then
from app.serving.batching import Continued
from app.serving.runtime import Runtime

router = APIRouter(prefix="/v1", tags=["grading API"])


_INSERT_ATTEMPTS = insert(Attempt)  # built once: its compiled form is cached by SQLAlchemy


class GradingResponse(JSONResponse):
    """JSON rendered by pydantic-core's serializer: a graded answer's 2 KB in about a quarter of the
    time of Starlette's `json.dumps` (4.7 against 17.8 µs; docs/PERFORMANCE.md, "The grading API's hot path"). The same
    JSON values; a NaN or infinity (never in a result) becomes null rather than invalid JSON."""

    def render(self, content: Any) -> bytes:
        return pydantic_core.to_json(content, inf_nan_mode="null")


@dataclass(frozen=True)
class GradedCall:
    """What one grading call writes: its attempts, and one more call on the key's usage counter.

    The group writer applies concurrent calls together (`apply_all`): one multi-row insert of
    every attempt and one counter update per key and endpoint, instead of two statements each.
    """

    key_id: str
    endpoint: str
    items: int
    attempts: list[dict[str, Any]]

    def __call__(self, session: Session) -> None:
        self.apply_all(session.connection(), [self])

    @classmethod
    def apply_all(cls, connection: Connection, calls: list[GradedCall]) -> None:
        rows = [row for call in calls for row in call.attempts]
        if rows:  # a plain executemany, without the ORM's bulk-insert bookkeeping
            connection.execute(_INSERT_ATTEMPTS, rows)
        usage: dict[tuple[str, str], list[int]] = {}
        for call in calls:
            counts = usage.setdefault((call.key_id, call.endpoint), [0, 0])
            counts[0] += 1
            counts[1] += call.items
        for (key_id, endpoint), (n, items) in usage.items():
            add_usage(connection, key_id, endpoint, items, calls=n)


async def _store(runtime: Runtime, key: Caller, endpoint: str, items: int, attempts: list[dict[str, Any]]) -> None:
    """Store the attempts and count the call, committed (with other requests') before the answer."""
    await runtime.writer.awrite(GradedCall(key.id, endpoint, items, attempts))


def _store_on_worker(runtime: Runtime, call: GradedCall) -> bool:
    """Store a lone request's call on the encoder's worker, if that costs no wait: True when done.

    In the attempt journal when the app keeps one (app/serving/journal.py), else committed when the group
    writer is idle. Only here: under load the group writer already commits several calls at once,
    and a `write` to the journal on the event loop costs it more than awaiting that commit
    (measured: 0.2-0.3 ms more of the loop's CPU per answer at 32 clients, `bench/bench_floor.py --commit`).
    """
    if runtime.journal is not None:
        runtime.journal.append(call)
        return True
    return runtime.writer.write_if_idle(call)


# The grading routes are async end to end: the caches answer the lookups, the micro-batcher the
# encode and the group writer the commit, all awaited, so a graded answer takes no request thread.
# They answer a GradingResponse of plain JSON values (no response-model pass over the result).


@router.post("/grade", response_model=None)
async def grade_one(body: GradeIn, runtime: RuntimeDep, key: ApiKeyDep) -> GradingResponse:
    """Grade one answer: a bank question (question_id), a registered rubric (rubric_id) or an inline question."""
    return await grade_one_response(runtime, key, body)


async def grade_one_response(runtime: Runtime, key: Caller, body: GradeIn) -> GradingResponse:
    """What POST /v1/grade answers (the route and the hot path in `fastpath.py` both answer this).

    A request that has the encoder to itself is finished on the worker that encoded it: graded and stored there
    (journaled, or committed when the group writer is idle; `then` below). Each hand-over between threads costs a
    wake-up, and at low load each thread wakes cold; this saves two of the four (`bench/bench_floor.py`;
    docs/PERFORMANCE.md, "The grading API's hot path"). Under load, the event loop grades and the group writer
    commits, as for every other call.
    """
    prepared = await prepare_items(runtime, key, [body], strict=True)

    def then(vectors: np.ndarray) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
        (result,), attempts = prepared.finish(vectors)
        return result, attempts, _store_on_worker(runtime, GradedCall(key.id, "grade", 1, attempts))

    try:  # as long as a queued write may take (the worker may commit this one itself)
        outcome = await encode_then(prepared.encoder, prepared.texts, then, runtime.writer.timeout_s)
    except TimeoutError as exc:
        raise UnavailableError("the grader did not answer in time; retry in a moment", retry_after=5) from exc
    if isinstance(outcome, Continued):
        result, attempts, written = outcome.value
    else:  # graded on a worker thread: the pair judge's pass would hold the event loop
        results, attempts = await run_in_threadpool(prepared.finish, outcome)
        result, written = results[0], False
    if not written:
        await _store(runtime, key, "grade", 1, attempts)
    return GradingResponse(result)


@router.post("/grade/batch", response_model=None)
async def grade_batch(
    body: BatchIn, runtime: RuntimeDep, key: UncountedApiKeyDep, limiter: RateLimiterDep
) -> GradingResponse:
    """Grade up to 100 answers in one call; an item that fails carries its own error.

    Each item costs one call of the key's rate limit. A batch that does not fit in what is left is refused
    whole (429 with Retry-After), so nothing is graded, stored or counted for it.
    """
    await charge(limiter, key, len(body.items))
    results, attempts = await grade_items(runtime, key, body.items)
    await _store(runtime, key, "grade/batch", len(body.items), attempts)
    return GradingResponse({"results": results})


@router.post("/rubrics", status_code=status.HTTP_201_CREATED)
def create_rubric(body: RubricIn, session: SessionDep, runtime: RuntimeDep, key: ApiKeyDep) -> dict[str, Any]:
    """Register a question once (everything about it precomputed); grade with its rubric_id."""
    _, _, book = runtime.grading()
    row = register_rubric(session, book, key, body)
    count_usage(session, key, "rubrics", 1)
    return {"rubric_id": row.id, "question": row.question, "model": row.model_id, "grader_version": row.grader_version}


@router.get("/rubrics/{rubric_id}")
def get_rubric(rubric_id: str, session: SessionDep, key: ApiKeyDep) -> dict[str, Any]:
    """A registered rubric (only the key that created it can read it)."""
    row = load_rubric(session, key, rubric_id)
    return {
        "rubric_id": row.id,
        "question": row.question,
        "reference_answers": row.reference_answers,
        "wrong_answers": row.wrong_answers,
        "examples": row.examples,
        "roles": (row.prepared.get("item") or {}).get("roles") or [],
        "model": row.model_id,
        "grader_version": row.grader_version,
    }
