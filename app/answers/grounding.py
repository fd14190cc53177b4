"""The grounded explanation of a verdict: the question's own, and the study-note passages that explain it.

Nothing here ever stands in another question's material for a question's explanation: a question
without an explanation of its own is explained by its note passages alone, or not at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.bank.repository import get_many
from app.bank.views import source_of
from app.models import ACTIVE, Passage, Question, QuestionPassage
from app.serving.cache import LRUCache
from ingest.index import LoadedIndex

NOTES_NOTE = "This question has no explanation of its own; this is how the study notes explain it."
NONE_NOTE = "No explanation is available for this question."
SECTION_SEPARATOR = " › "


def _nearest(index: LoadedIndex, vector: np.ndarray, kinds: set[str], exclude: set[str], k: int) -> list[str]:
    """The k nearest questions by texts of the given kinds; widens the search until found or exhausted."""
    fetch = 8 * k + 4 * len(exclude)
    while True:
        _, positions = index.search(vector[None, :], fetch)
        out: list[str] = []
        for pos in positions[0]:
            entry = index.entries[int(pos)] if pos >= 0 else None
            qid = entry.question_id if entry and entry.kind in kinds else None
            if qid is not None and qid not in exclude and qid not in out:
                out.append(qid)
        if len(out) >= k or fetch >= len(index.entries):
            return out[:k]
        fetch *= 4


def note_passages(session: Session, question_id: str) -> list[Passage]:
    """The live note passages linked to a question (its notes' `explains`), in reading order."""
    return list(
        session.scalars(
            select(Passage)
            .join(QuestionPassage, QuestionPassage.passage_id == Passage.id)
            .where(QuestionPassage.question_id == question_id, Passage.status == ACTIVE)
            .order_by(QuestionPassage.position)
        )
    )


def passage_source(passages: list[Passage]) -> dict[str, Any]:
    """The citation of consecutive passages of one note: file, section (heading path) and line span."""
    first, last = passages[0], passages[-1]
    return {
        "file": first.note,
        "number": None,
        "lines": [first.line_start, last.line_end],
        "title": first.title,
        "section": SECTION_SEPARATOR.join(first.heading_path),
    }


def passage_view(p: Passage) -> dict[str, Any]:
    """One note passage as served: its text, the note's title, heading path, file and line span, and the
    references it cites (with the locators used, e.g. "§3.2")."""
    return {
        "kind": "notes",
        "id": p.id,
        "text": p.text,
        "note_title": p.title,
        "heading_path": list(p.heading_path),
        "file": p.note,
        "lines": [p.line_start, p.line_end],
        "references": list(p.citations),
    }


def _first_section(passages: list[Passage]) -> list[Passage]:
    """The leading passages that belong to the same note and top-level section as the first."""
    head = passages[0]
    group = []
    for p in passages:
        if p.note != head.note or p.heading_path[:1] != head.heading_path[:1]:
            break
        group.append(p)
    return group


def explanation_for(session: Session, question: Question) -> dict[str, Any]:
    """The question's own explanation ("own") with the note passages that explain it; without one,
    the passages alone ("notes": the first section's text, cited by note, section and lines); else "none".
    """
    passages = note_passages(session, question.id)
    views = [passage_view(p) for p in passages]
    if question.explanation:
        return {"kind": "own", "text": question.explanation, "source": source_of(question), "note": None,
                "passages": views}
    if passages:
        section = _first_section(passages)
        return {"kind": "notes", "text": "\n\n".join(p.text for p in section), "source": passage_source(section),
                "note": NOTES_NOTE, "passages": views}
    return {"kind": "none", "text": None, "source": None, "note": NONE_NOTE, "passages": []}


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
            "explanation": explanation_for(session, question),
            "related_questions": related_questions(session, index, question, vector),
        })

    def clear(self) -> None:
        """Forget everything (tests; a new bank version does not need it)."""
        self._items.clear()


MATERIAL = MaterialCache()
