"""Bank questions (rows or ingestion records) as grading items."""

from __future__ import annotations

from typing import Any, Protocol

from app.bank.views import options_of
from app.grading import GradingItem


class QuestionLike(Protocol):
    """What both a `Question` row and an ingestion record have."""

    id: str
    text: str
    accepted_answers: list[str]
    extra_answers: list[str]
    wrong_options: list[str]
    explanation: str | None
    examples: list[dict[str, Any]]


def item_for(q: QuestionLike, extra_examples: list[tuple[str, str]] | None = None) -> GradingItem:
    """The grading item of a bank question; options in the order learners see them."""
    options = [o["text"] for o in options_of(q)] or None
    examples = [(e["answer"], e["label"]) for e in q.examples] + list(extra_examples or [])
    return GradingItem(
        question=q.text,
        reference_answers=[*q.accepted_answers, *q.extra_answers],
        wrong_answers=list(q.wrong_options),
        explanation=q.explanation,
        examples=examples,
        options=options,
        key=q.id,
    )
