"""Which question a session asks next: due reviews, weak topics, new questions."""

from __future__ import annotations

import random
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.learners.scheduler import retrievability
from app.models import ACTIVE, Attempt, Card, Question, QuizSession, as_utc


def _pool(session: Session, quiz: QuizSession) -> list[Question]:
    rows = session.scalars(select(Question).where(Question.status == ACTIVE).order_by(Question.id))
    return [q for q in rows if not quiz.topics or set(q.topics) & set(quiz.topics)]


def _asked(session: Session, quiz: QuizSession) -> tuple[set[str], set[str]]:
    """Question ids and concept ids already answered in this session."""
    ids = set(session.scalars(select(Attempt.question_id).where(Attempt.session_id == quiz.id)))
    ids.discard(None)
    concepts = set(session.scalars(select(Question.concept_id).where(Question.id.in_(ids)))) if ids else set()
    return {str(i) for i in ids}, concepts


def _weakness(questions: list[Question], cards: dict[str, Card], now: datetime) -> dict[str, float]:
    """Mean recall probability per topic over the questions seen; unseen topics are not 'weak'."""
    per: dict[str, list[float]] = {}
    for q in questions:
        if q.id in cards:
            for t in q.topics:
                per.setdefault(t, []).append(retrievability(cards[q.id].state, now))
    return {t: sum(v) / len(v) for t, v in per.items()}


def choose_next(session: Session, quiz: QuizSession, now: datetime) -> Question | None:
    """The next question for the session's mode, or None when there is nothing left to ask."""
    asked, concepts = _asked(session, quiz)
    pool = [q for q in _pool(session, quiz) if q.id not in asked]
    if not pool:
        return None
    cards = {c.question_id: c for c in session.scalars(select(Card).where(Card.learner_id == quiz.learner_id))}
    due = sorted((q for q in pool if q.id in cards and as_utc(cards[q.id].due) <= now), key=lambda q: cards[q.id].due)
    fresh = [q for q in pool if q.id not in cards]
    random.Random(f"{quiz.id}:{len(asked)}").shuffle(fresh)
    # Prefer concepts not yet asked in this session, so near-duplicates don't come back to back.
    fresh.sort(key=lambda q: q.concept_id in concepts)
    if quiz.mode == "review":
        return due[0] if due else None
    if quiz.mode == "new":
        return fresh[0] if fresh else None
    if due:
        return due[0]
    weakness = _weakness(_pool(session, quiz), cards, now)
    if weakness:
        weakest = sorted(weakness, key=lambda t: weakness[t])
        for topic in weakest:
            candidates = [q for q in fresh if topic in q.topics]
            if candidates:
                return candidates[0]
    return fresh[0] if fresh else None
