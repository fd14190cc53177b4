"""What a chat message can name: taxonomy topics and demos, found despite typos and spacing."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from app.chat.text import find_phrase, normalise
from contracts.demos import DEMOS

# Words learners use for each demo beyond its name and title.
DEMO_ALIASES: dict[str, tuple[str, ...]] = {
    "allreduce": ("all-reduce", "ring all-reduce", "allreduce bandwidth", "bus bandwidth"),
    "collectives": ("collective*", "broadcast", "all-gather", "reduce-scatter", "all-to-all"),
    "pipeline": ("pipeline*", "bubble*", "GPipe", "1F1B", "micro-batch*"),
    "zero": ("ZeRO", "FSDP", "sharding", "optimizer state", "optimiser state"),
    "mixed_precision": ("mixed precision", "fp16", "bf16", "loss scaling", "overflow"),
    "checkpointing": ("checkpointing", "activation checkpointing", "recomputation"),
    "sampler": ("sampler", "DistributedSampler", "set_epoch"),
    "matmul": ("matmul", "matrix multiply", "MFU", "throughput"),
}


@dataclass(frozen=True)
class Term:
    """A phrase (normalised words) that names a topic or a demo."""

    key: str
    words: tuple[str, ...]
    primary: bool  # the key's own name, preferred over a keyword on ties


@dataclass(frozen=True)
class Found:
    """A term found in a message, with the spans of words that name it (all its terms found there)."""

    key: str
    spans: tuple[tuple[int, int], ...]

    def covers(self, i: int) -> bool:
        """Whether word i is part of the name."""
        return any(start <= i < end for start, end in self.spans)


def phrase_words(phrase: str) -> tuple[str, ...]:
    """Normalised words of a vocabulary phrase; a trailing '*' marks a word stem."""
    words = normalise(phrase.replace("_", " ")).split()
    if phrase.endswith("*") and words:
        words[-1] += "*"
    return tuple(words)


def _best(terms: list[Term], words: list[str]) -> Found | None:
    """The key of the longest term found (its own name on ties), with every span naming that key."""
    best: tuple[tuple[int, int, int], str] | None = None
    spans: dict[str, list[tuple[int, int]]] = {}
    for term in terms:
        span = find_phrase(words, term.words)
        if span is None:
            continue
        spans.setdefault(term.key, []).append(span)
        rank = (span[1] - span[0], len(term.words), int(term.primary))
        if best is None or rank > best[0]:
            best = (rank, term.key)
    return Found(best[1], tuple(spans[best[1]])) if best else None


class Vocabulary:
    """Topic and demo names with their keywords, matched typo-tolerantly."""

    def __init__(self, topics: list[tuple[str, str, list[str]]]) -> None:
        self.topic_names = {tid: name for tid, name, _ in topics}
        self.topic_terms: list[Term] = []
        for tid, name, keywords in topics:
            self.topic_terms += [Term(tid, phrase_words(tid.replace("-", " ")), True)]
            self.topic_terms += [Term(tid, phrase_words(name), True)]
            self.topic_terms += [Term(tid, phrase_words(k), False) for k in keywords if phrase_words(k)]
        self.demo_titles = {name: title for name, (title, _) in DEMOS.items()}
        self.demo_terms = [Term(name, phrase_words(name), True) for name in DEMOS]
        self.demo_terms += [Term(n, phrase_words(a), False) for n, aliases in DEMO_ALIASES.items() for a in aliases]

    def topic(self, words: list[str]) -> Found | None:
        """The taxonomy topic the words name, if any."""
        return _best(self.topic_terms, words)

    def demo(self, words: list[str]) -> Found | None:
        """The demo the words name, if any."""
        return _best(self.demo_terms, words)


@lru_cache(maxsize=4)
def _load(path: Path, mtime: float) -> Vocabulary:
    if not path.exists():
        return Vocabulary([])
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    topics = [(str(t["id"]), str(t["name"]), [str(k) for k in t.get("keywords", [])]) for t in raw.get("topics", [])]
    return Vocabulary(topics)


def vocabulary(taxonomy_path: Path) -> Vocabulary:
    """The vocabulary of the taxonomy file (re-read when the file changes)."""
    return _load(taxonomy_path, taxonomy_path.stat().st_mtime if taxonomy_path.exists() else 0.0)
