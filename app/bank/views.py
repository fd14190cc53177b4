"""What a learner may see of a question, and what an author sees."""

from __future__ import annotations

import random
import string
from typing import Any, Protocol

from app.models import Question


class _WithOptions(Protocol):
    id: str
    accepted_answers: list[str]
    wrong_options: list[str]


def source_of(q: Question) -> dict[str, Any]:
    """The citation of a question: file, question number and line span."""
    return {"file": q.document, "number": q.number, "lines": [q.line_start, q.line_end]}


def options_of(q: _WithOptions) -> list[dict[str, str]]:
    """The multiple-choice options, shuffled the same way every time (seeded by the id), unmarked."""
    if not q.wrong_options:
        return []
    texts = [q.accepted_answers[0], *q.wrong_options]
    random.Random(q.id).shuffle(texts)
    return [{"key": string.ascii_uppercase[i], "text": t} for i, t in enumerate(texts)]


def learner_view(q: Question) -> dict[str, Any]:
    """A question as a learner may see it: never the accepted answer or the explanation."""
    return {
        "id": q.id,
        "question": q.text,
        "topics": list(q.topics),
        "concept_id": q.concept_id,
        "source": source_of(q),
        "options": options_of(q),
    }


def author_view(q: Question) -> dict[str, Any]:
    """Everything about a question, for authors and the CLI."""
    return {
        **learner_view(q),
        "accepted_answers": list(q.accepted_answers),
        "extra_answers": list(q.extra_answers),
        "wrong_options": list(q.wrong_options),
        "explanation": q.explanation,
        "notes": list(q.notes),
        "examples": list(q.examples),
        "layout": q.layout,
        "status": q.status,
    }
