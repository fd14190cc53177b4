"""Token-level alignment of an answer with a reference: weighted recall of its key ideas."""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from app.grading.text import STOPWORDS, content_stems, has_match, raw_tokens, stem, text_cache

# Words that add nothing a learner must know; they count little towards coverage.
_WEAK = frozenset(
    {"allow", "enabl", "provid", "typical", "typically", "certain", "different", "differ",
     "specific", "various", "multipl", "multiple", "help", "ensur", "need", "requir", "mak",
     "may", "often", "usual", "set", "new", "instead", "work", "lik", "well", "good", "better",
     "simpl", "simple", "kind", "sort", "also", "lot", "call", "mean", "term"}
)
_IDEA_BREAK = re.compile(
    r"[;,:()]|\s(?:so|which|while|whereas|because|by|to|and|with|without|instead of|rather than|"
    r"for|during|across|on|in|at|via|before|after|reducing|enabling|avoiding|allowing|using)\s",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class WeightedStems:
    """A reference's content stems with their weights (question words and filler weigh less)."""

    stems: tuple[str, ...]
    weights: tuple[float, ...]


def weigh(reference: str, question: str) -> WeightedStems:
    """Weight each distinct content stem of a reference by how much knowing it shows."""
    asked = set(content_stems(question))
    seen: dict[str, float] = {}
    for s in content_stems(reference):
        if s in seen:
            continue
        weight = 1.0
        if s in asked:
            weight = 0.35
        if s in _WEAK or len(s) <= 1:
            weight = min(weight, 0.25)
        seen[s] = weight
    return WeightedStems(tuple(seen), tuple(seen.values()))


def recall(answer_stems: AbstractSet[str], ref: WeightedStems) -> float:
    """Weighted fraction of the reference's stems that the answer contains (typos tolerated)."""
    total = sum(ref.weights)
    if total <= 0:
        return 0.0
    hit = sum(w for s, w in zip(ref.stems, ref.weights, strict=True) if has_match(s, answer_stems))
    return hit / total


def precision(answer_stems: list[str], vocabulary: AbstractSet[str]) -> float:
    """Fraction of the answer's content stems found in the question's vocabulary (on-topic-ness)."""
    if not answer_stems:
        return 0.0
    return sum(1 for s in answer_stems if has_match(s, vocabulary)) / len(answer_stems)


def key_ideas(reference: str, question: str) -> list[str]:
    """Phrases of a reference answer that carry knowledge not already in the question."""
    asked = set(content_stems(question))
    ideas: list[str] = []
    for chunk in _IDEA_BREAK.split(f" {reference} "):
        words = [t for t in raw_tokens(chunk) if t not in STOPWORDS]
        if not words:
            continue
        new = [w for w in words if stem(w) not in asked and stem(w) not in _WEAK]
        if new:
            ideas.append(chunk.strip(" .,;"))
    return ideas


def idea_covered(idea: str, answer_stems: AbstractSet[str], question: str) -> bool:
    """An idea is covered when most of its new (not-in-question) stems are in the answer."""
    stems = _idea_stems(idea, question)
    if not stems:
        return False
    hits = sum(1 for s in stems if has_match(s, answer_stems))
    return hits / len(stems) >= 0.5


@text_cache()  # a rubric's ideas are asked about for every answer graded against it
def _idea_stems(idea: str, question: str) -> tuple[str, ...]:
    """The stems of an idea that the question does not already give (all of them if none)."""
    asked = set(content_stems(question))
    stems = content_stems(idea)
    return tuple(s for s in stems if s not in asked and s not in _WEAK) or tuple(stems)
