"""Answer a concept question from the study notes, or say the notes don't cover it.

Retrieval takes the note passages nearest the question in the shared index; the relevance head
(app/ask/relevance.py) then decides whether they actually answer it. An answer carries the
passages with their citations (note, section, lines, references); a refusal names the topics
nearest the question, so the learner knows where the material stops.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.answers.grounding import passage_source, passage_view
from app.ask.relevance import RelevanceHead, Vocabulary, default_relevance, features
from app.models import ACTIVE, Passage, Question
from app.serving.cache import LRUCache
from ingest.embedder import Encoder
from ingest.index import ASK, LoadedIndex
from ingest.notes import passage_embed_text

PASSAGES = 3  # passages cited in an answer (the evaluation's recall@3)
NEIGHBOURS = 5  # cosines the head reads (the best and its margin over the next ones)
NOT_COVERED = "The notes don't cover that, so I won't guess."

_VOCABULARIES: LRUCache[str, Vocabulary] = LRUCache(4)


@dataclass(frozen=True)
class PassageHit:
    """A note passage near the query and its cosine (its text's, or an authored question's if nearer)."""

    passage: Passage
    score: float


def passage_document(p: Passage) -> str:
    """What a passage says including where it sits: the note's title, its headings, then its text."""
    return passage_embed_text(p.title, list(p.heading_path), p.text)


@dataclass(frozen=True)
class Retrieval:
    """The passages nearest a query, best first, and the best cosine of any bank question's text."""

    hits: list[PassageHit]
    bank: float


def _section(p: Passage) -> tuple[str, tuple[str, ...]]:
    return p.note, tuple(p.heading_path)


def retrieve(session: Session, index: LoadedIndex, vector: np.ndarray, k: int) -> Retrieval:
    """The best passage of each of the k note sections nearest a query vector, and how near the nearest
    bank text is. One passage per section: three paragraphs of one section would cite one idea three
    times, where three sections give the learner (and the relevance head) three views. A section is as
    near as its nearest passage or the nearest question authored for it (a note's `asks`), whichever
    is nearer, and cites its passage nearest by text."""
    fetch = 8 * k
    while True:
        scores, positions = index.search(vector[None, :], fetch)
        found: dict[str, float] = {}
        asked: dict[str, float] = {}
        bank = 0.0
        for score, pos in zip(scores[0], positions[0], strict=True):
            entry = index.entries[int(pos)] if pos >= 0 else None
            if entry is None:
                continue
            if entry.passage_id is None:
                bank = max(bank, float(score))
            elif entry.kind == ASK:
                asked[entry.passage_id] = max(asked.get(entry.passage_id, 0.0), float(score))
            elif entry.passage_id not in found:
                found[entry.passage_id] = float(score)
        ids = set(found) | set(asked)
        live = select(Passage).where(Passage.id.in_(ids), Passage.status == ACTIVE)
        rows = {p.id: p for p in session.scalars(live)}
        # A section cites its passage nearest by text; a question authored for it only makes it nearer.
        sections: dict[tuple[str, tuple[str, ...]], PassageHit] = {}
        for pid, score in sorted(found.items(), key=lambda kv: (-kv[1], kv[0])):
            if pid in rows:
                sections.setdefault(_section(rows[pid]), PassageHit(rows[pid], score))
        for pid, score in sorted(asked.items()):
            if pid in rows:
                hit = sections.get(_section(rows[pid]))
                if hit is None or hit.score < score:
                    sections[_section(rows[pid])] = PassageHit(hit.passage if hit else rows[pid], score)
        if len(sections) >= k or fetch >= len(index.entries):
            return Retrieval(sorted(sections.values(), key=lambda h: (-h.score, h.passage.id))[:k], bank)
        fetch *= 4


def _documents(session: Session) -> Iterator[str]:
    for p in session.scalars(select(Passage).where(Passage.status == ACTIVE).order_by(Passage.id)):
        yield passage_document(p)
    for q in session.scalars(select(Question).where(Question.status == ACTIVE).order_by(Question.id)):
        yield "\n".join([q.text, *q.accepted_answers, q.explanation or ""])


def vocabulary(session: Session, index: LoadedIndex) -> Vocabulary:
    """The words of the live material (passages and questions), built once per index version."""
    vocab = _VOCABULARIES.get(index.version)
    if vocab is None:
        vocab = Vocabulary.build(_documents(session))
        _VOCABULARIES.put(index.version, vocab)
    return vocab


def _topics(hits: list[PassageHit], names: Mapping[str, str], limit: int = 3) -> list[dict[str, str]]:
    """The topics of the nearest passages, nearest first, with their names where the taxonomy has them."""
    seen: list[str] = []
    for hit in hits:
        for topic in hit.passage.topics:
            if topic not in seen:
                seen.append(topic)
    return [{"id": t, "name": names.get(t, t)} for t in seen[:limit]]


def assess(
    session: Session, index: LoadedIndex, vocab: Vocabulary, text: str, vector: np.ndarray
) -> tuple[Retrieval, np.ndarray]:
    """What the relevance head decides on: the nearest passages (the first PASSAGES are cited) and the
    head's features of them. The evaluation calls this too, so it measures exactly what is served."""
    found = retrieve(session, index, vector, max(PASSAGES, NEIGHBOURS))
    cited = found.hits[:PASSAGES]
    headings = [" ".join((h.passage.note.removesuffix(".md"), *h.passage.heading_path)) for h in cited]
    x = features(text, [h.score for h in found.hits], [passage_document(h.passage) for h in cited], vocab,
                 found.bank, headings)
    return found, x


def ask(
    session: Session,
    encoder: Encoder,
    index: LoadedIndex,
    text: str,
    topic_names: Mapping[str, str] | None = None,
    head: RelevanceHead | None = None,
) -> dict[str, Any]:
    """The passages that answer a question, cited, with the head's confidence; or "not covered" with
    the nearest topics."""
    head = head or default_relevance()
    found, x = assess(session, index, vocabulary(session, index), text, encoder.encode([text])[0])
    hits, cited = found.hits, found.hits[:PASSAGES]
    answered, confidence = head.answers(x) if hits else (False, 0.0)
    topics = _topics(hits, topic_names or {})
    if not answered:
        names = ", ".join(t["name"] for t in topics)
        return {
            "answered": False,
            "confidence": round(confidence, 3),
            "text": NOT_COVERED + (f" The nearest topics in the notes are: {names}." if names else ""),
            "passages": [],
            "nearest_topics": topics,
        }
    passages = [
        {**passage_view(h.passage), "score": round(h.score, 3), "source": passage_source([h.passage])}
        for h in cited
    ]
    return {"answered": True, "confidence": round(confidence, 3), "text": passages[0]["text"],
            "passages": passages, "nearest_topics": topics}
