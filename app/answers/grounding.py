"""The grounded explanation of a verdict: the question's own, or clearly labelled related material."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.bank.repository import get_many
from app.bank.views import source_of
from app.models import ACTIVE, Question
from app.serving.cache import LRUCache
from ingest.index import LoadedIndex

RELATED_NOTE = "This question has no explanation of its own; this is related material from another question."


def _nearest(index: LoadedIndex, vector: np.ndarray, kinds: set[str], exclude: set[str], k: int) -> list[str]:
    """The k nearest questions by texts of the given kinds; widens the search until found or exhausted."""
    fetch = 8 * k + 4 * len(exclude)
    while True:
        _, positions = index.search(vector[None, :], fetch)
        out: list[str] = []
        for pos in positions[0]:
            entry = index.entries[int(pos)] if pos >= 0 else None
            if entry and entry.kind in kinds and entry.question_id not in exclude and entry.question_id not in out:
                out.append(entry.question_id)
        if len(out) >= k or fetch >= len(index.entries):
            return out[:k]
        fetch *= 4


def explanation_for(session: Session, index: LoadedIndex, question: Question, vector: np.ndarray) -> dict[str, Any]:
    """The question's explanation with its citation; for one without, the nearest explanation."""
    if question.explanation:
        return {"kind": "own", "text": question.explanation, "source": source_of(question), "note": None}
    for qid in _nearest(index, vector, {"explanation"}, {question.id}, 3):
        other = get_many(session, [qid]).get(qid)
        if other is not None and other.status == ACTIVE and other.explanation:
            return {
                "kind": "related",
                "text": other.explanation,
                "source": source_of(other),
                "question_id": other.id,
                "question": other.text,
                "note": RELATED_NOTE,
            }
    return {"kind": "none", "text": None, "source": None, "note": "No explanation is available for this question."}


def related_questions(
    session: Session, index: LoadedIndex, question: Question, vector: np.ndarray, k: int = 3
) -> list[dict[str, Any]]:
    """Questions of the same concept first, then the nearest other questions."""
    same = list(
        session.scalars(
            select(Question).where(
                Question.concept_id == question.concept_id, Question.id != question.id, Question.status == ACTIVE
            )
        )
    )
    ids = [q.id for q in same]
    ids += [qid for qid in _nearest(index, vector, {"question"}, {question.id, *ids}, k) if qid not in ids]
    rows = get_many(session, ids[:k])
    return [
        {"id": qid, "question": rows[qid].text, "same_concept": qid in {q.id for q in same}}
        for qid in ids[:k]
        if qid in rows
    ]


class MaterialCache:
    """A question's grounded explanation and related questions, per bank version.

    Both depend only on the question and the live index, so they are found once per (index
    version, question) instead of on every graded answer (two index searches and three queries).
    A new bank version has new keys; the least recently used entries go when the cache is full.
    """

    def __init__(self, size: int = 4096) -> None:
        self._items: LRUCache[tuple[str, str], dict[str, Any]] = LRUCache(size)

    def material(self, session: Session, index: LoadedIndex, question: Question, vector: np.ndarray) -> dict[str, Any]:
        """{"explanation": ..., "related_questions": ...} (shared between calls: do not modify)."""
        key = (index.version, question.id)
        found = self._items.get(key)
        if found is not None:
            return found
        return self._items.put(key, {
            "explanation": explanation_for(session, index, question, vector),
            "related_questions": related_questions(session, index, question, vector),
        })

    def clear(self) -> None:
        """Forget everything (tests; a new bank version does not need it)."""
        self._items.clear()


MATERIAL = MaterialCache()
