"""Storage of what the bot posted, who answers in which session, and which events were handled."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.models import SlackEvent, SlackPost, SlackPostSession

QUIZ, DAILY = "quiz", "daily"


def save_post(
    session: Session,
    *,
    team_id: str,
    channel_id: str,
    ts: str,
    kind: str,
    question_id: str | None = None,
    learner_id: str | None = None,
    session_id: str | None = None,
) -> SlackPost:
    """Remember a question message the bot posted (its thread is where answers go)."""
    post = SlackPost(
        team_id=team_id,
        channel_id=channel_id,
        ts=ts,
        kind=kind,
        question_id=question_id,
        learner_id=learner_id,
        session_id=session_id,
    )
    session.add(post)
    session.flush()
    return post


def find_post(session: Session, *, team_id: str, channel_id: str, ts: str) -> SlackPost | None:
    """The bot's question message at the root of a thread, if it is one."""
    return session.scalars(
        select(SlackPost).where(SlackPost.team_id == team_id, SlackPost.channel_id == channel_id, SlackPost.ts == ts)
    ).first()


def answer_session_id(session: Session, post: SlackPost, learner_id: str) -> str | None:
    """The learner's one-question session for a daily post, if they have started one."""
    row = session.get(SlackPostSession, (post.id, learner_id))
    return row.session_id if row else None


def link_answer_session(session: Session, post: SlackPost, learner_id: str, session_id: str) -> None:
    """Record the learner's session for a daily post."""
    session.add(SlackPostSession(post_id=post.id, learner_id=learner_id, session_id=session_id))
    session.flush()


def posted_questions(session: Session, *, team_id: str, channel_id: str, kind: str) -> set[str]:
    """Question ids already posted to a channel as this kind of post."""
    rows = session.scalars(
        select(SlackPost.question_id).where(
            SlackPost.team_id == team_id, SlackPost.channel_id == channel_id, SlackPost.kind == kind
        )
    )
    return {r for r in rows if r}


def claim_event(factory: sessionmaker[Session], event_id: str) -> bool:
    """True the first time an event id is seen; False for Slack's retries of it."""
    try:
        with transaction(factory) as session:
            session.add(SlackEvent(event_id=event_id))
    except IntegrityError:
        return False
    return True
