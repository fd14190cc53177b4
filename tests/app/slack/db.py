"""Reading what the app stored, for assertions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from app.bank.views import learner_view, source_of
from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.models import Appeal, Attempt, Question, QuizSession, SlackPost


def read(settings: Settings, fn: Any) -> Any:
    """Run fn(session) on the test database."""
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return fn(session)
    finally:
        engine.dispose()


def pending(settings: Settings, thread_ts: str) -> dict[str, Any]:
    """The question waiting in a quiz thread: learner view, accepted answer, citation."""

    def find(session: Any) -> dict[str, Any]:
        post = session.scalars(select(SlackPost).where(SlackPost.ts == thread_ts)).one()
        qid = session.get(QuizSession, post.session_id).current_question_id if post.kind == "quiz" else post.question_id
        q = session.get(Question, qid)
        return {
            **learner_view(q),
            "accepted": q.accepted_answers[0],
            "citation": source_of(q),
            "explanation": q.explanation,
        }

    result: dict[str, Any] = read(settings, find)
    return result


def count_attempts(settings: Settings) -> int:
    """How many answers were graded."""
    return int(read(settings, lambda s: s.scalar(select(func.count()).select_from(Attempt))))


def appeals(settings: Settings) -> list[tuple[str, str]]:
    """(original, claimed) verdict of each appeal."""
    return list(read(settings, lambda s: [(a.original_verdict, a.claimed_verdict) for a in s.scalars(select(Appeal))]))
