"""Semantic search over the bank: nearest questions to a text, by any of their texts."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.bank.repository import get_many
from app.models import ACTIVE, Question
from ingest.embedder import Encoder
from ingest.index import LoadedIndex

_OVERFETCH = 4  # each question has several vectors; fetch more so k distinct questions remain


@dataclass
class Hit:
    """A question near the query, by its best-matching text."""

    question: Question
    score: float
    kind: str


def search(
    session: Session, encoder: Encoder, index: LoadedIndex, text: str, k: int = 5, kinds: set[str] | None = None
) -> list[Hit]:
    """The k nearest active questions to the text, best first."""
    vector = encoder.encode([text])
    scores, positions = index.search(vector, k * _OVERFETCH)
    best: dict[str, tuple[float, str]] = {}
    for score, pos in zip(scores[0], positions[0], strict=True):
        if pos < 0:
            continue
        entry = index.entries[int(pos)]
        if kinds and entry.kind not in kinds:
            continue
        if entry.question_id not in best or score > best[entry.question_id][0]:
            best[entry.question_id] = (float(score), entry.kind)
    rows = get_many(session, list(best))
    hits = [
        Hit(rows[qid], score, kind) for qid, (score, kind) in best.items() if qid in rows and rows[qid].status == ACTIVE
    ]
    hits.sort(key=lambda h: (-h.score, h.question.id))
    return hits[:k]
