"""HTTP route of appeals: "I was right" on an attempt."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from app.appeals.schemas import AppealIn, AppealOut
from app.appeals.service import file_appeal
from app.deps import RuntimeDep, SessionDep

router = APIRouter(prefix="/v1", tags=["learning"])


@router.post("/attempts/{attempt_id}/appeal", response_model=AppealOut, status_code=status.HTTP_201_CREATED)
def appeal(attempt_id: str, body: AppealIn, session: SessionDep, runtime: RuntimeDep) -> dict[str, Any]:
    """ "I was right": record the claim, re-schedule the card, keep both verdicts for authors."""
    if runtime.journal is not None:  # a grading API attempt may still be on its way to the database
        runtime.journal.settle([attempt_id])
    return file_appeal(
        session, attempt_id=attempt_id, claimed=body.claimed_verdict, comment=body.comment, learner_id=None
    )
