"""The topic taxonomy and keyword tagging of questions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Topic:
    """One topic: an id, a display name and the keyword patterns that tag it."""

    id: str
    name: str
    patterns: tuple[re.Pattern[str], ...]


def _pattern(keyword: str) -> re.Pattern[str]:
    body = re.escape(keyword.strip()).replace(r"\*", r"[\w-]*").replace(r"\ ", r"[\s_-]+")
    return re.compile(rf"(?<![\w-]){body}(?![\w])", re.IGNORECASE)


class Taxonomy:
    """The topics and named concepts from data/taxonomy.yaml, in file order."""

    def __init__(self, topics: list[Topic], concepts: list[Topic] | None = None) -> None:
        self.topics = topics
        self.concepts = concepts or []
        self.by_id = {t.id: t for t in topics}

    @classmethod
    def load(cls, path: Path) -> Taxonomy:
        """Read the taxonomy file."""
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        topics = [
            Topic(t["id"], t["name"], tuple(_pattern(str(k)) for k in t.get("keywords", []))) for t in raw["topics"]
        ]
        concepts = [
            Topic(c["id"], c["id"], tuple(_pattern(str(k)) for k in c.get("terms", [])))
            for c in raw.get("concepts", [])
        ]
        return cls(topics, concepts)

    def primary_concept(self, text: str) -> str | None:
        """The named concept that the text mentions first, if any."""
        best: tuple[int, str] | None = None
        for concept in self.concepts:
            for pattern in concept.patterns:
                m = pattern.search(text)
                if m and (best is None or m.start() < best[0]):
                    best = (m.start(), concept.id)
        return best[1] if best else None

    def tag(self, *texts: str | None) -> list[str]:
        """Topic ids whose keywords occur in any of the texts, in taxonomy order."""
        blob = "\n".join(t for t in texts if t)
        return [t.id for t in self.topics if any(p.search(blob) for p in t.patterns)]

    def unknown(self, topic_ids: list[str]) -> list[str]:
        """The ids that are not in the taxonomy."""
        return [t for t in topic_ids if t not in self.by_id]


@lru_cache(maxsize=8)
def _cached(path: Path, mtime: float) -> Taxonomy:
    return Taxonomy.load(path)


def load_taxonomy(path: Path) -> Taxonomy:
    """The taxonomy, read once and again only when the file changes (for request paths)."""
    return _cached(path, path.stat().st_mtime)
