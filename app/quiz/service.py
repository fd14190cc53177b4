"""Quiz sessions: create, serve the next question, take an answer exactly once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.answers.rubrics import RubricBook
from app.answers.service import grade_bank_answer
from app.bank.views import learner_view
from app.db import end_reads, get_or_404
from app.errors import ConflictError
from app.ids import new_id
from app.learners.scheduler import review
from app.learners.service import get_learner
from app.models import Attempt, Card, QuizSession, utcnow
from app.quiz.selection import choose_next
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


def create_session(session: Session, *, learner_id: str, topics: list[str], length: int, mode: str) -> QuizSession:
    """A new quiz session for an existing learner."""
    get_learner(session, learner_id)
    quiz = QuizSession(id=new_id("s"), learner_id=learner_id, topics=topics, length=length, mode=mode)
    session.add(quiz)
    session.flush()
    return quiz


def get_session(session: Session, session_id: str) -> QuizSession:
    """A quiz session by id, or 404."""
    return get_or_404(session, QuizSession, session_id, "quiz session")


def session_progress(session: Session, quiz: QuizSession) -> dict[str, Any]:
    """Counts derived from the stored attempts, so concurrent answers can never double count."""
    rows = session.execute(
        select(Attempt.verdict, func.count()).where(Attempt.session_id == quiz.id).group_by(Attempt.verdict)
    ).all()
    counts = {verdict: int(n) for verdict, n in rows}
    answered = sum(counts.values())
    return {
        "answered": answered,
        "correct": counts.get("correct", 0),
        "partial": counts.get("partial", 0),
        "incorrect": counts.get("incorrect", 0),
        "remaining": max(0, quiz.length - answered),
        "length": quiz.length,
        "done": answered >= quiz.length,
    }


def next_question(session: Session, quiz: QuizSession, now: datetime | None = None) -> dict[str, Any]:
    """The pending question (the same one until it is answered), or a 'done' marker."""
    progress = session_progress(session, quiz)
    if progress["done"]:
        return {"done": True, "reason": "session complete", "question": None, "progress": progress}
    if quiz.current_question_id:
        from app.bank.repository import get_many

        pending = get_many(session, [quiz.current_question_id]).get(quiz.current_question_id)
        if pending is not None and pending.status == "active":
            return {"done": False, "reason": None, "question": learner_view(pending), "progress": progress}
    question = choose_next(session, quiz, now or utcnow())
    if question is None:
        reason = "no reviews are due" if quiz.mode == "review" else "no more questions for these topics"
        return {"done": True, "reason": reason, "question": None, "progress": progress}
    quiz.current_question_id = question.id
    return {"done": False, "reason": None, "question": learner_view(question), "progress": progress}


def _stored(session: Session, quiz_id: str, key: str | None, question_id: str) -> Attempt | None:
    """The attempt this request repeats (same Idempotency-Key), else one already made for the question."""
    if key:
        found = session.scalars(
            select(Attempt).where(Attempt.session_id == quiz_id, Attempt.idempotency_key == key)
        ).first()
        if found is not None:
            return found
    return session.scalars(
        select(Attempt).where(Attempt.session_id == quiz_id, Attempt.question_id == question_id)
    ).first()


def _replay(session: Session, quiz: QuizSession, attempt: Attempt, key: str | None, question_id: str) -> dict[str, Any]:
    if key and attempt.idempotency_key == key:
        return {
            **_complete_result(attempt),
            "attempt_id": attempt.id,
            "progress": session_progress(session, quiz),
            "replayed": True,
        }
    raise ConflictError(
        f"question {question_id} was already answered in this session",
        details={"attempt_id": attempt.id, "question_id": question_id},
    )


def _complete_result(attempt: Attempt) -> dict[str, Any]:
    """The stored result of an attempt, completed from the attempt's own columns where it lacks a part.

    An attempt is written whole, in one statement of one transaction. Older versions of the service
    on SQLite could commit the row before its `schedule` was added, and a crash or error in between
    left it so. Such an attempt is completed here, not treated as absent: its card review and the
    session's move past the question were committed with it, so grading the answer again would
    review the card twice (and the session no longer asks that question). The schedule is that
    review, computed again: `review` is deterministic, and the attempt keeps the card as it was
    before (`card_before`), the verdict and the time of the review (`created_at`). The stored row
    is left as it is, so a replay only reads.
    """
    result = {
        "question_id": attempt.question_id,
        "verdict": attempt.verdict,
        "score": attempt.score,
        "confidence": attempt.confidence,
        **(attempt.result or {}),
    }
    if not isinstance(result.get("schedule"), dict):
        _, due, rating = review(attempt.card_before, attempt.verdict, attempt.created_at)
        result["schedule"] = {"rating": attempt.rating if attempt.rating is not None else rating,
                              "due": due.isoformat()}
    return result


def _update_card(
    session: Session, learner_id: str, question_id: str, verdict: str, when: datetime
) -> tuple[dict[str, Any] | None, int, datetime]:
    """Review the learner's card for the question (row-locked); returns (state before, rating, due)."""
    card = session.get(Card, (learner_id, question_id), with_for_update=True)
    before = dict(card.state) if card else None
    state, due, rating = review(before, verdict, when)
    if card is None:
        card = Card(learner_id=learner_id, question_id=question_id, state=state, due=due, reviews=0)
        session.add(card)
    card.state, card.due, card.last_rating, card.updated_at = state, due, rating, when
    card.reviews = (card.reviews or 0) + 1
    return before, rating, due


def submit_answer(
    session: Session,
    grading: tuple[Encoder, LoadedIndex, RubricBook],
    *,
    session_id: str,
    question_id: str,
    answer: str,
    choice: str | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Grade and record one answer; a retry with the same Idempotency-Key returns the same result."""
    quiz = get_session(session, session_id)
    stored = _stored(session, quiz.id, idempotency_key, question_id)
    if stored is not None:
        return _replay(session, quiz, stored, idempotency_key, question_id)
    if quiz.current_question_id != question_id:
        raise ConflictError(
            "answer the question this session asked: GET /v1/sessions/{id}/next gives it",
            details={"expected_question_id": quiz.current_question_id, "question_id": question_id},
        )
    encoder, index, book = grading
    question, result, body = grade_bank_answer(session, book, encoder, index, question_id, answer, choice)
    end_reads(session)
    now = datetime.now(UTC)
    try:
        # One transaction: the card's review, the attempt (whole, schedule included) and the
        # session's move past the question are stored together or not at all.
        with session.begin_nested():
            before, rating, due = _update_card(session, quiz.learner_id, question.id, result.verdict, now)
            attempt = Attempt(
                id=new_id("a"),
                learner_id=quiz.learner_id,
                session_id=quiz.id,
                question_id=question.id,
                idempotency_key=idempotency_key,
                answer=answer,
                choice=choice,
                verdict=result.verdict,
                score=result.score,
                confidence=result.confidence,
                rating=rating,
                card_before=before,
                result={**body, "schedule": {"rating": rating, "due": due.isoformat()}},
                grader_version=result.grader_version,
                model_id=encoder.model_id,
                created_at=now,
            )
            session.add(attempt)
            quiz.current_question_id = None
            session.flush()
    except IntegrityError:
        stored = _stored(session, quiz.id, idempotency_key, question_id)
        if stored is None:
            raise
        return _replay(session, quiz, stored, idempotency_key, question_id)
    return {**attempt.result, "attempt_id": attempt.id, "progress": session_progress(session, quiz), "replayed": False}
