"""Whether the retrieved passages actually answer a learner's question: the ask path's relevance head.

Cosine rank alone cannot tell "the notes explain this" from "the notes are about something close":
a question on SHARP in-network reductions lands near the all-reduce passages at a high cosine.
What tells them apart is whether the question's specific words are ones the material uses, so the
head reads lexical evidence beside the cosines:

- the best cosine and its margin over the next passages;
- how much of the question's weight (IDF over the notes and the bank) the top passages cover;
- how much of it the material never uses at all (unknown words: SHARP, Kubernetes, sourdough);
- how many of the question's two-word phrases the top passages use ("ring attention", "expert
  choice": known words in a combination the notes never discuss);
- the best cosine of a bank question's texts (the quiz asks about what the notes explain).

The cosines are those retrieval ranks by (app/ask/service.py): a passage's own, or that of a
question the note's authors wrote for its section (`asks`), whichever is nearer.

Learners misspell, so a word matches a corpus word one edit away (five letters or more), and
"all-reduce", "all reduce" and "allreduce" are one word. The head is a logistic regression fitted by
`tutor models fit-ask --write` on the tuning set `data/train/ask_dev.jsonl` (grouped
cross-validation by topic); its weights and recipe are in `models/ask/relevance.json`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import cachetools
import numpy as np

from app.config import ASK_MODEL_PATH

RELEVANCE_PATH = ASK_MODEL_PATH
FEATURES = ("top", "margin", "covered", "unknown", "phrases", "length", "bank", "heading")

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    """
    a about above after again all also am an and any are as at be because been before being below
    between both but by can could did do does doing don done down during each else even ever every few
    for from further get gets getting give go goes going good got had has have having he her here hers
    him his how i if in into is isn it its itself just know like ll make makes me mean means might more
    most much must my need needs no nor not now of off often on once one only or other our out over own
    please pretty really s same say says should so some such t than that thats the their them then there
    these they thing things this those through to too under until up us use used uses using ve very want
    was way we well were what whats when where whether which while who whom why will with without would
    yes you your actually anyway basically ok okay hey hi hello thanks thank explain tell someone
    somebody
    """.split()  # noqa: SIM905 (a word list reads best as words)
)


def _stem(word: str) -> str:
    """A light suffix strip, enough to match plurals and verb forms ("gradients", "sharding")."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    """Content words of a text, lower-cased and stemmed; adjacent words also count joined
    ("all reduce" -> "allreduce") so hyphenation and spacing never decide a match."""
    raw = _WORD.findall(text.lower())
    out = [_stem(w) for w in raw if w not in _STOP and len(w) > 1]
    out += [_stem(a + b) for a, b in itertools.pairwise(raw) if b not in _STOP]
    return out


def _question_words(text: str) -> list[str]:
    """The question's own content words (not the joined pairs), each once, in order."""
    raw = _WORD.findall(text.lower())
    return list(dict.fromkeys(_stem(w) for w in raw if w not in _STOP and len(w) > 1))


def _pairs(text: str) -> set[str]:
    """Adjacent content-word pairs of a text, stemmed ("ring attention" -> "ring attention")."""
    raw = [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]
    return {f"{a} {b}" for a, b in itertools.pairwise(raw)}


def _one_edit(a: str, b: str) -> bool:
    """Whether two words are at most one insertion, deletion, substitution or transposition apart."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                   and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if la < lb else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]


@dataclass
class Vocabulary:
    """The material's words with their inverse document frequency (a document is a passage or a
    question with its answers and explanation)."""

    idf: dict[str, float]
    default_idf: float
    # Words by first letter, for the one-edit match; and the matches made (bounded: words come from anyone).
    _by_initial: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _matched: cachetools.LRUCache[str, str | None] = field(
        default_factory=lambda: cachetools.LRUCache(maxsize=4096), repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        for w in sorted(self.idf):
            self._by_initial.setdefault(w[:1], []).append(w)

    @classmethod
    def build(cls, documents: Iterable[str]) -> Vocabulary:
        counts: dict[str, int] = {}
        n = 0
        for doc in documents:
            n += 1
            for w in set(words(doc)):
                counts[w] = counts.get(w, 0) + 1
        idf = {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in counts.items()}
        return cls(idf=idf, default_idf=math.log(1 + n) + 1.0)

    def canonical(self, word: str) -> str | None:
        """The corpus word a (possibly misspelled) word stands for, or None when the material never uses it."""
        if word in self.idf:
            return word
        if len(word) < 5:
            return None
        with self._lock:
            if word in self._matched:
                return self._matched[word]
        same_start = self._by_initial.get(word[:1], ())
        near = [v for v in same_start if abs(len(v) - len(word)) <= 1 and _one_edit(word, v)]
        match = near[0] if near else None  # the list is sorted: the first is the least
        with self._lock:
            self._matched[word] = match
        return match

    def weight(self, word: str | None) -> float:
        return self.default_idf if word is None else self.idf[word]


def features(
    question: str, scores: Sequence[float], passages: Sequence[str], vocab: Vocabulary, bank: float = 0.0,
    headings: Sequence[str] = (),
) -> np.ndarray:
    """The relevance head's inputs (named in FEATURES) for a question and its top passages, best first.

    `passages` are the texts the answer would cite (with their headings); `scores` are the cosines of
    the nearest passages, best first (at least the cited ones); `bank` the best cosine of a bank
    question's text (question, answer or explanation); `headings` the cited passages' note names and
    heading paths. A section whose title names what the question asks about ("Capacity factor and load
    balancing" for "what does the capacity factor do") explains it; a gap the notes only mention shares its
    words with the text, rarely with a title (grouped CV in `tutor models fit-ask`).
    """
    top = float(scores[0]) if len(scores) else 0.0
    rest = [float(s) for s in scores[1:5]]
    margin = top - (sum(rest) / len(rest) if rest else 0.0)
    cited: set[str] = set()
    cited_pairs: set[str] = set()
    for text in passages:
        cited.update(words(text))
        cited_pairs.update(_pairs(text))
    titled = {w for text in headings for w in words(text)}
    qwords = _question_words(question)
    total = covered = unknown = in_title = 0.0
    for w in qwords:
        canon = vocab.canonical(w)
        weight = vocab.weight(canon)
        total += weight
        if canon is None:
            unknown += weight
            continue
        if canon in cited:
            covered += weight
        if canon in titled:
            in_title += weight
    total = max(total, 1e-9)
    qpairs = _pairs(question)
    phrases = sum(1 for p in qpairs if p in cited_pairs) / len(qpairs) if qpairs else 1.0
    return np.array(
        [top, margin, covered / total if qwords else 0.0, unknown / total if qwords else 1.0,
         phrases, min(len(qwords), 12) / 12.0, bank, in_title / total if qwords else 0.0],
        dtype=np.float64,
    )


@dataclass(frozen=True)
class RelevanceHead:
    """A logistic regression over standardised FEATURES: P(the top passages answer the question)."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    version: str

    def probability(self, x: np.ndarray) -> float:
        z = float(((x - self.mean) / self.scale) @ self.weights + self.bias)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def answers(self, x: np.ndarray) -> tuple[bool, float]:
        """Whether the passages answer, and the probability they do."""
        p = self.probability(x)
        return p >= self.threshold, p

    def as_json(self) -> dict[str, object]:
        return {"features": list(FEATURES), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "weights": self.weights.tolist(), "bias": self.bias, "threshold": self.threshold,
                "version": self.version}


class RelevanceError(RuntimeError):
    """The relevance head's file is missing or damaged."""


def load_relevance(path: Path = RELEVANCE_PATH) -> RelevanceHead:
    """The fitted head; its features must be the ones this code computes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        head = data["head"]
        if tuple(head["features"]) != FEATURES:
            raise RelevanceError("the ask relevance head was fitted on other features; refit it")
        return RelevanceHead(
            mean=np.asarray(head["mean"], dtype=np.float64), scale=np.asarray(head["scale"], dtype=np.float64),
            weights=np.asarray(head["weights"], dtype=np.float64), bias=float(head["bias"]),
            threshold=float(head["threshold"]), version=str(head["version"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RelevanceError("the ask relevance head is missing or damaged") from exc


@lru_cache(maxsize=1)
def default_relevance() -> RelevanceHead:
    """The shipped head (loaded once; checked when the service loads, so damage shows in /readyz)."""
    return load_relevance(RELEVANCE_PATH)


def corpus_digest(documents: Iterable[str]) -> str:
    """A short hash of the material a vocabulary was built from."""
    h = hashlib.sha256()
    for doc in documents:
        h.update(doc.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
