"""Near-duplicate questions across documents are linked as one concept (none is dropped)."""

from __future__ import annotations

import faiss
import numpy as np

from ingest.records import QuestionRecord

CANDIDATES = 8  # nearest questions checked per question; keeps linking near-linear in bank size
SAME_TERM_FLOOR = 0.3  # questions naming the same concept must still be about the same thing


def similarity(a: QuestionRecord, b: QuestionRecord, vectors: dict[str, np.ndarray]) -> float:
    """Mean of question-text and best accepted-answer cosine: both must agree for a duplicate."""
    q = float(vectors[a.text] @ vectors[b.text])
    ans = max(float(vectors[x] @ vectors[y]) for x in a.accepted_answers for y in b.accepted_answers)
    return (q + ans) / 2


def link_concepts(
    records: list[QuestionRecord],
    vectors: dict[str, np.ndarray],
    threshold: float,
    terms: dict[str, str | None] | None = None,
) -> dict[str, str]:
    """Map each question id to its concept id: the smallest id of its near-duplicate group.

    Two questions from different documents are linked when they are near-identical
    (similarity >= threshold), or when their texts name the same concept first (`terms`)
    and they are not far apart semantically.
    """
    terms = terms or {}
    ordered = sorted(records, key=lambda r: r.id)
    parent = {r.id: r.id for r in ordered}
    if len(ordered) < 2:
        return parent

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    matrix = np.stack([vectors[r.text] for r in ordered]).astype(np.float32)
    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    _, neighbours = index.search(matrix, min(CANDIDATES + 1, len(ordered)))
    pairs = {(min(i, int(j)), max(i, int(j))) for i, row in enumerate(neighbours) for j in row if j >= 0}
    by_term: dict[str, list[int]] = {}
    for i, r in enumerate(ordered):
        if term := terms.get(r.id):
            by_term.setdefault(term, []).append(i)
    pairs |= {(i, j) for group in by_term.values() for i in group for j in group if i < j}
    for i, j in sorted(pairs):
        a, b = ordered[i], ordered[j]
        if i == j or a.document == b.document:
            continue
        shared = terms.get(a.id) is not None and terms.get(a.id) == terms.get(b.id)
        if similarity(a, b, vectors) >= (SAME_TERM_FLOOR if shared else threshold):
            ra, rb = find(a.id), find(b.id)
            parent[max(ra, rb)] = min(ra, rb)
    return {r.id: find(r.id) for r in ordered}
