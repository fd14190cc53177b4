"""Rubrics of bank questions, built once per process from cached vectors (no model calls)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.answers.items import QuestionLike, item_for
from app.db import transaction
from app.grading import Rubric, prepare_many
from app.grading.rubric import attach_neighbours
from app.models import ACTIVE, LabelledExample, Question
from ingest.embedder import Encoder
from ingest.vectors import CachedEncoder, VectorCache


def embed_rubric_texts(questions: Sequence[QuestionLike], encoder: Encoder) -> None:
    """Embed everything the grader needs of these questions (key ideas too) through `encoder`'s cache.

    `tutor ingest` calls it, so that serving builds every rubric from cached vectors.
    """
    prepare_many([item_for(q) for q in questions], encoder)


def accepted_examples(session: Session, question_ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Labelled answers accepted by authors (e.g. from appeals), per question."""
    out: dict[str, list[tuple[str, str]]] = {}
    rows = session.scalars(
        select(LabelledExample).where(LabelledExample.question_id.in_(question_ids)).order_by(LabelledExample.id)
    )
    for row in rows:
        out.setdefault(row.question_id, []).append((row.answer, row.label))
    return out


class RubricBook:
    """Every active question's rubric, rebuilt for one question when its labelled examples change."""

    def __init__(self, factory: sessionmaker[Session], model_id: str, encoder: Callable[[], Encoder]) -> None:
        self.factory = factory
        self.encoder = CachedEncoder(VectorCache(factory, model_id), encoder)
        self._rubrics: dict[str, Rubric] = {}
        self._examples_seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def build(self) -> int:
        """Build all rubrics in one batch; returns how many."""
        with transaction(self.factory) as session:
            rows = list(session.scalars(select(Question).where(Question.status == ACTIVE)))
            extra = accepted_examples(session, [r.id for r in rows])
        rubrics = prepare_many([item_for(r, extra.get(r.id)) for r in rows], self.encoder)
        attach_neighbours(rubrics)
        with self._lock:
            self._rubrics = {r.id: rub for r, rub in zip(rows, rubrics, strict=True)}
            self._examples_seen = {r.id: len(extra.get(r.id, [])) for r in rows}
        return len(rubrics)

    def get(self, session: Session, question: Question) -> Rubric:
        """The question's rubric; rebuilt if authors accepted new labelled answers since."""
        count = int(
            session.scalar(
                select(func.count()).select_from(LabelledExample).where(LabelledExample.question_id == question.id)
            )
            or 0
        )
        with self._lock:
            rubric = self._rubrics.get(question.id)
            if rubric is not None and self._examples_seen.get(question.id) == count:
                return rubric
        extra = accepted_examples(session, [question.id]).get(question.id, [])
        (rubric,) = prepare_many([item_for(question, extra)], self.encoder)
        with self._lock:
            old = self._rubrics.get(question.id)
            rubric.neighbours = old.neighbours if old is not None else None
            self._rubrics[question.id] = rubric
            self._examples_seen[question.id] = count
        return rubric
