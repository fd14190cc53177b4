"""HTTP routes of the public grading API (X-API-Key)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status
from sqlalchemy import insert
from sqlalchemy.orm import Session

from app.deps import RuntimeDep, SessionDep
from app.grade_api.schemas import BatchIn, GradeIn, RubricIn
from app.grade_api.service import grade_items, load_rubric, register_rubric
from app.keys.deps import ApiKeyDep, count_usage
from app.models import ApiKey, Attempt
from app.runtime import Runtime

router = APIRouter(prefix="/v1", tags=["grading API"])


def _store(runtime: Runtime, key: ApiKey, endpoint: str, items: int, attempts: list[dict[str, Any]]) -> None:
    """Store the attempts and count the call, committed (with other requests') before the answer."""

    def write(session: Session) -> None:
        if attempts:
            session.execute(insert(Attempt), attempts)
        count_usage(session, key, endpoint, items)

    runtime.writer.write(write)


@router.post("/grade")
def grade_one(body: GradeIn, session: SessionDep, runtime: RuntimeDep, key: ApiKeyDep) -> dict[str, Any]:
    """Grade one answer: a bank question (question_id), a registered rubric (rubric_id) or an inline question."""
    (result,), attempts = grade_items(session, runtime.grading(), key, [body], strict=True)
    _store(runtime, key, "grade", 1, attempts)
    return result


@router.post("/grade/batch")
def grade_batch(body: BatchIn, session: SessionDep, runtime: RuntimeDep, key: ApiKeyDep) -> dict[str, Any]:
    """Grade up to 100 answers in one call; an item that fails carries its own error."""
    results, attempts = grade_items(session, runtime.grading(), key, body.items)
    _store(runtime, key, "grade/batch", len(body.items), attempts)
    return {"results": results}


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
        "model": row.model_id,
        "grader_version": row.grader_version,
    }
