"""A learner's progress: mastery per topic, due reviews, streak and history."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.bank.repository import topic_counts
from app.learners.scheduler import retrievability
from app.models import ACTIVE, Attempt, Card, Question, as_utc, utcnow

HISTORY = 20


def streak(days: set[date], today: date) -> int:
    """Consecutive days with at least one answer, ending today (or yesterday if not yet today)."""
    day = today if today in days else today - timedelta(days=1)
    count = 0
    while day in days:
        count += 1
        day -= timedelta(days=1)
    return count


def progress(session: Session, learner_id: str, now: datetime | None = None) -> dict[str, Any]:
    """Mastery per topic (mean FSRS recall probability over the topic's questions), due, streak, history."""
    now = now or utcnow()
    cards = {c.question_id: c for c in session.scalars(select(Card).where(Card.learner_id == learner_id))}
    questions = list(session.scalars(select(Question).where(Question.status == ACTIVE)))
    totals = topic_counts(session)
    recall: dict[str, list[float]] = {}
    for q in questions:
        card = cards.get(q.id)
        value = retrievability(card.state, now) if card else 0.0
        for topic in q.topics:
            recall.setdefault(topic, []).append(value)
    attempts = list(
        session.scalars(select(Attempt).where(Attempt.learner_id == learner_id).order_by(Attempt.created_at.desc()))
    )
    per_topic_seen: dict[str, int] = {}
    topics_of = {q.id: q.topics for q in questions}
    for qid in cards:
        for topic in topics_of.get(qid, []):
            per_topic_seen[topic] = per_topic_seen.get(topic, 0) + 1
    mastery = [
        {
            "topic": topic,
            "mastery": round(sum(values) / len(values), 3),
            "questions": totals.get(topic, len(values)),
            "seen": per_topic_seen.get(topic, 0),
        }
        for topic, values in sorted(recall.items())
    ]
    return {
        "learner_id": learner_id,
        "answered": len(attempts),
        "correct": sum(a.verdict == "correct" for a in attempts),
        "due": sum(as_utc(c.due) <= now for c in cards.values()),
        "next_due": min((as_utc(c.due) for c in cards.values()), default=None),
        "streak": streak({as_utc(a.created_at).date() for a in attempts}, now.date()),
        "mastery": mastery,
        "history": [
            {
                "attempt_id": a.id,
                "question_id": a.question_id,
                "verdict": a.verdict,
                "score": a.score,
                "at": as_utc(a.created_at),
            }
            for a in attempts[:HISTORY]
        ],
    }
