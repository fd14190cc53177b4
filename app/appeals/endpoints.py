"""HTTP route of appeals: "I was right" on an attempt."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from app.appeals.schemas import AppealIn, AppealOut
from app.appeals.service import file_appeal
from app.deps import RuntimeDep, SessionDep
from app.keys.deps import OptionalApiKeyDep

router = APIRouter(prefix="/v1", tags=["learning"])


@router.post("/attempts/{attempt_id}/appeal", response_model=AppealOut, status_code=status.HTTP_201_CREATED)
def appeal(
    attempt_id: str, body: AppealIn, session: SessionDep, runtime: RuntimeDep, key: OptionalApiKeyDep
) -> dict[str, Any]:
    """ "I was right" from the attempt's owner (`learner_id`, or the grading API key that made it):
    record the claim, re-schedule the card, keep both verdicts for authors."""
    if runtime.journal is not None:  # a grading API attempt may still be on its way to the database
        runtime.journal.settle([attempt_id])
    return file_appeal(
        session, attempt_id=attempt_id, claimed=body.claimed_verdict, comment=body.comment,
        learner_id=body.learner_id, api_key_id=key.id if key else None, author=bool(key and "author" in key.scopes),
    )
