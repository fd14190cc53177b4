"""Author annotations kept beside the raw documents: caveats, extra accepted answers, topics.

The raw quiz documents stay unchanged; where one of them teaches something inaccurate the
correction lives here, keyed by question id, and is shown with the question's explanation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml


@dataclass
class Annotation:
    """What an author attached to one question."""

    question_id: str
    question: str = ""
    notes: list[str] = field(default_factory=list)
    extra_answers: list[str] = field(default_factory=list)
    topics: list[str] | None = None


def load_annotations(path: Path) -> dict[str, Annotation]:
    """Read annotations.yaml; a missing file means no annotations."""
    if not path.exists():
        return {}
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out: dict[str, Annotation] = {}
    for item in raw.get("questions", []):
        qid = str(item["id"])
        out[qid] = Annotation(
            question_id=qid,
            question=str(item.get("question", "")),
            notes=[str(n).strip() for n in item.get("notes", [])],
            extra_answers=[str(a).strip() for a in item.get("extra_answers", [])],
            topics=list(item["topics"]) if "topics" in item else None,
        )
    return out
