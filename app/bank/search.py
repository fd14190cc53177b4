"""Semantic search over the bank: nearest questions to a text, by any of their texts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
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


def _candidates(index: LoadedIndex, vector: np.ndarray, wanted: int) -> dict[str, None]:
    """The questions of the `wanted` nearest question texts (note passages, also indexed, are skipped)."""
    fetch = wanted
    while True:
        _, positions = index.search(vector, fetch)
        ids = [index.entries[int(p)].question_id for p in positions[0] if p >= 0]
        found = [qid for qid in ids if qid is not None]
        if len(found) >= wanted or len(ids) >= len(index.entries):
            return dict.fromkeys(found[:wanted])
        fetch *= 4


def search(
    session: Session, encoder: Encoder, index: LoadedIndex, text: str, k: int = 5, kinds: set[str] | None = None
) -> list[Hit]:
    """The k nearest active questions to the text, best first.

    Candidates come from the index; each is then scored on all of its texts: half its best
    match, half the mean of its best match per kind (question, answer, explanation), so a
    question that agrees with the query on several of its texts beats one with a single lucky text.
    """
    vector = encoder.encode([text])
    candidates = _candidates(index, vector, k * _OVERFETCH)
    scored: list[tuple[float, str, str]] = []
    for qid in candidates:
        places = [p for p in index.positions_of(qid) if not kinds or index.entries[p].kind in kinds]
        if not places:
            continue
        sims = index.vectors_at(places) @ vector[0]
        per_kind: dict[str, float] = {}
        for place, sim in zip(places, sims, strict=True):
            kind = index.entries[place].kind
            per_kind[kind] = max(per_kind.get(kind, -1.0), float(sim))
        best_kind = max(per_kind, key=lambda kd: per_kind[kd])
        score = 0.5 * per_kind[best_kind] + 0.5 * sum(per_kind.values()) / len(per_kind)
        scored.append((score, qid, best_kind))
    rows = get_many(session, [qid for _, qid, _ in scored])
    hits = [Hit(rows[qid], s, kd) for s, qid, kd in scored if qid in rows and rows[qid].status == ACTIVE]
    hits.sort(key=lambda h: (-h.score, h.question.id))
    return hits[:k]
