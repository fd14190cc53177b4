"""Answer a concept question with the best-supported passages of the bank, or decline honestly."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.bank.search import search
from app.bank.views import source_of
from ingest.embedder import Encoder
from ingest.index import LoadedIndex

MIN_SCORE = 0.42  # below this the nearest material is about something else (see tests/ask)
PASSAGES = 3


def ask(session: Session, encoder: Encoder, index: LoadedIndex, text: str) -> dict[str, Any]:
    """Passages (explanations, else accepted answers) with citations and a confidence; or no material."""
    hits = search(session, encoder, index, text, k=PASSAGES)
    top = hits[0].score if hits else 0.0
    if top < MIN_SCORE:
        return {
            "answered": False,
            "confidence": round(max(top, 0.0), 3),
            "text": "I have no material on that in the question bank, so I won't guess.",
            "passages": [],
        }
    passages = []
    for hit in hits:
        if hit.score < MIN_SCORE:
            break
        q = hit.question
        passages.append(
            {
                "question_id": q.id,
                "question": q.text,
                "text": q.explanation or q.accepted_answers[0],
                "kind": "explanation" if q.explanation else "accepted_answer",
                "caveats": list(q.notes),
                "score": round(hit.score, 3),
                "source": source_of(q),
            }
        )
    confidence = min(1.0, max(0.0, (top - MIN_SCORE) / (0.8 - MIN_SCORE)) * 0.5 + 0.5)
    return {"answered": True, "confidence": round(confidence, 3), "text": passages[0]["text"], "passages": passages}
