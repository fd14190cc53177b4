"""Creating and finding learners."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import get_or_404
from app.ids import new_id
from app.models import Learner


def create_learner(session: Session, *, display_name: str | None = None) -> Learner:
    """A new learner with an opaque id."""
    learner = Learner(id=new_id("l"), display_name=display_name)
    session.add(learner)
    session.flush()
    return learner


def get_learner(session: Session, learner_id: str) -> Learner:
    """A learner by id, or 404."""
    return get_or_404(session, Learner, learner_id, "learner")


def learner_for_ref(session: Session, external_ref: str, display_name: str | None = None) -> Learner:
    """The learner mapped to an outside identity (e.g. a Slack user), created on first sight."""
    found = session.scalars(select(Learner).where(Learner.external_ref == external_ref)).first()
    if found is not None:
        return found
    learner = Learner(id=new_id("l"), external_ref=external_ref, display_name=display_name)
    try:
        with session.begin_nested():
            session.add(learner)
    except IntegrityError:  # another process mapped it first
        return session.scalars(select(Learner).where(Learner.external_ref == external_ref)).one()
    return learner
