"""The daily question of a channel and the weekly leaderboard of its answers."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.bank.views import learner_view
from app.db import transaction
from app.models import ACTIVE, Attempt, Learner, Question, QuizSession, utcnow
from app.slack import repository as repo
from app.slack.repository import DAILY

POINTS = {"correct": 2, "partial": 1}
TOP = 10


@dataclass(frozen=True)
class Standing:
    """One learner's line on the weekly leaderboard."""

    user_id: str
    points: int
    correct: int
    answered: int


def pick_question(session: Session, *, team_id: str, channel_id: str, topic: str | None, seed: str) -> dict[str, Any]:
    """A question not yet posted to the channel as a daily (any, once all have been), as a learner sees it."""
    rows = list(session.scalars(select(Question).where(Question.status == ACTIVE).order_by(Question.id)))
    rows = [q for q in rows if topic is None or topic in q.topics]
    if not rows:
        raise LookupError("the bank has no questions for that topic; run `tutor ingest`")
    posted = repo.posted_questions(session, team_id=team_id, channel_id=channel_id, kind=DAILY)
    fresh = [q for q in rows if q.id not in posted] or rows
    return learner_view(random.Random(seed).choice(fresh))


def choose_daily(
    factory: sessionmaker[Session], *, team_id: str, channel_id: str, topic: str | None = None
) -> dict[str, Any]:
    """Today's question for a channel."""
    with transaction(factory) as session:
        seed = f"{team_id}:{channel_id}:{utcnow().date().isoformat()}"
        return pick_question(session, team_id=team_id, channel_id=channel_id, topic=topic, seed=seed)


def week_start(now: datetime) -> datetime:
    """Monday 00:00 UTC of the week containing `now`."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


def leaderboard(factory: sessionmaker[Session], team_id: str, now: datetime | None = None) -> list[Standing]:
    """This week's daily-question answers of the workspace, best first (2 points correct, 1 partial)."""
    start = week_start(now or utcnow())
    prefix = f"slack:{team_id}:"
    query = (
        select(Learner.external_ref, Attempt.verdict, func.count())
        .join(QuizSession, Attempt.session_id == QuizSession.id)
        .join(Learner, Learner.id == Attempt.learner_id)
        .where(QuizSession.mode == DAILY, Learner.external_ref.startswith(prefix), Attempt.created_at >= start)
        .group_by(Learner.external_ref, Attempt.verdict)
    )
    totals: dict[str, dict[str, int]] = {}
    with transaction(factory) as session:
        for ref, verdict, count in session.execute(query):
            per = totals.setdefault(str(ref).removeprefix(prefix), {})
            per[verdict] = per.get(verdict, 0) + int(count)
    table = [
        Standing(
            user_id=user,
            points=sum(POINTS.get(v, 0) * n for v, n in counts.items()),
            correct=counts.get("correct", 0),
            answered=sum(counts.values()),
        )
        for user, counts in totals.items()
    ]
    return sorted(table, key=lambda s: (-s.points, -s.correct, s.user_id))[:TOP]
