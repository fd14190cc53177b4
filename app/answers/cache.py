"""Bank questions as graded answers need them, held in memory for a few seconds at a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.answers.rubrics import RubricBook
from app.answers.service import question_view
from app.bank.repository import get_question
from app.grading import Rubric
from app.serving.cache import LRUCache
from ingest.index import LoadedIndex


@dataclass(frozen=True)
class BankEntry:
    """A question's rubric and the grounded material every verdict on it carries (read-only)."""

    rubric: Rubric
    view: dict[str, Any]


class BankCache:
    """Per (bank version, question), what grading needs, read from the database at most once per `ttl_s`.

    The grading API's hot path then needs no query to know the question. The price is staleness
    bounded by `ttl_s`: for that long a question retired by a new ingestion still grades, and an
    example answer an author has just accepted is not used yet. `ttl_s=0` reads every time.
    """

    def __init__(self, ttl_s: float, size: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: LRUCache[tuple[str, str], BankEntry] = LRUCache(size, ttl_s, clock)

    def get(self, index: LoadedIndex, question_id: str) -> BankEntry | None:
        """The entry while it is fresh, else None (then `load` it)."""
        return self._items.get((index.version, question_id))

    def clear(self) -> None:
        """Forget every entry (the next request for each reads it again)."""
        self._items.clear()

    def load(self, session: Session, index: LoadedIndex, book: RubricBook, question_id: str) -> BankEntry:
        """Read the question (NotFoundError when unknown or retired), build and keep its entry."""
        question = get_question(session, question_id)
        rubric = book.get(session, question)
        entry = BankEntry(rubric, question_view(session, index, question, rubric))
        return self._items.put((index.version, question_id), entry)
