"""HTTP routes of learners: a new learner id, and a learner's progress."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status

from app.deps import SessionDep
from app.learners.progress import progress
from app.learners.schemas import LearnerIn, LearnerOut
from app.learners.service import create_learner, get_learner

router = APIRouter(prefix="/v1", tags=["learning"])


@router.post("/learners", response_model=LearnerOut, status_code=status.HTTP_201_CREATED)
def new_learner(body: LearnerIn, session: SessionDep) -> LearnerOut:
    """Issue a new opaque learner id."""
    learner = create_learner(session, display_name=body.display_name)
    return LearnerOut(id=learner.id, display_name=learner.display_name)


@router.get("/learners/{learner_id}/progress")
def learner_progress(learner_id: str, session: SessionDep) -> dict[str, Any]:
    """Mastery per topic, due reviews, streak and recent history."""
    get_learner(session, learner_id)
    return progress(session, learner_id)
