"""HTTP routes of quiz sessions and answers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, status

from app.deps import RuntimeDep, SessionDep
from app.quiz import service
from app.quiz.schemas import (
    AnswerIn,
    AnswerOut,
    NextOut,
    SessionIn,
    SessionOut,
)

router = APIRouter(prefix="/v1", tags=["learning"])


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
