"""HTTP routes of learners, quiz sessions, answers and appeals."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, status

from app.appeals.service import file_appeal
from app.deps import RuntimeDep, SessionDep
from app.learners.progress import progress
from app.learners.service import create_learner, get_learner
from app.quiz import service
from app.quiz.schemas import (
    AnswerIn,
    AnswerOut,
    AppealIn,
    AppealOut,
    LearnerIn,
    LearnerOut,
    NextOut,
    SessionIn,
    SessionOut,
)

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


@router.post("/sessions", response_model=SessionOut, status_code=status.HTTP_201_CREATED)
def new_session(body: SessionIn, session: SessionDep) -> SessionOut:
    """Start a quiz session (modes: new, review, adaptive)."""
    quiz = service.create_session(
        session, learner_id=body.learner_id, topics=body.topics, length=body.length, mode=body.mode
    )
    return SessionOut(
        id=quiz.id,
        learner_id=quiz.learner_id,
        mode=quiz.mode,
        topics=quiz.topics,
        length=quiz.length,
        progress=service.session_progress(session, quiz),
    )


@router.get("/sessions/{session_id}/next", response_model=NextOut)
def next_question(session_id: str, session: SessionDep) -> dict[str, Any]:
    """The question to answer now (the same one until it is answered)."""
    return service.next_question(session, service.get_session(session, session_id))


@router.post("/sessions/{session_id}/answers", response_model=AnswerOut)
def answer(
    session_id: str,
    body: AnswerIn,
    session: SessionDep,
    runtime: RuntimeDep,
    idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
) -> dict[str, Any]:
    """Grade an answer to the current question; a retry with the same Idempotency-Key counts once."""
    return service.submit_answer(
        session,
        runtime.grading(),
        session_id=session_id,
        question_id=body.question_id,
        answer=body.answer,
        choice=body.choice,
        idempotency_key=idempotency_key,
    )


@router.post("/attempts/{attempt_id}/appeal", response_model=AppealOut, status_code=status.HTTP_201_CREATED)
def appeal(attempt_id: str, body: AppealIn, session: SessionDep, runtime: RuntimeDep) -> dict[str, Any]:
    """ "I was right": record the claim, re-schedule the card, keep both verdicts for authors."""
    if runtime.journal is not None:  # a grading API attempt may still be on its way to the database
        runtime.journal.settle([attempt_id])
    return file_appeal(
        session, attempt_id=attempt_id, claimed=body.claimed_verdict, comment=body.comment, learner_id=None
    )
