"""How well the ask path retrieves and abstains, on a labelled set of learner questions.

A set (`data/eval/ask.jsonl`, frozen; `data/train/ask_dev.jsonl`, for fitting) has one question per
line: answerable ones name the note sections that answer them (`"collectives.md#All-gather"`),
the others are marked `"answerable": false` with a kind (`on_domain_gap`, `off_domain`).

- recall@3: the share of answerable questions with a passage of a labelled section among the
  three nearest passages (what an answer would cite), whatever the head decides;
- abstention precision and recall: of the questions the head refuses, how many the notes really
  do not answer; of those the notes do not answer, how many it refuses;
- answered and supported: answerable questions answered with a labelled section among the
  cited passages.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.ask.relevance import RelevanceHead
from app.ask.service import PASSAGES, assess, vocabulary
from app.models import Passage
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


@dataclass
class Observation:
    """One labelled question and what retrieval found for it."""

    item: dict[str, Any]
    x: np.ndarray
    top: list[str]  # "<note>#<heading path>" of the cited passages, best first
    hit: bool  # a labelled section among the cited passages (answerable questions only)

    @property
    def answerable(self) -> bool:
        return bool(self.item["answerable"])

    @property
    def group(self) -> str:
        """The cross-validation group: the question's topic (or nearest topic); off-domain ones by id."""
        return str(self.item.get("topic") or self.item.get("nearest_topic") or f"off:{self.item['id']}")


def load_items(path: Path) -> list[dict[str, Any]]:
    """A labelled set's lines; a line without a question or a label is an error."""
    items = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        item = json.loads(line)
        if not isinstance(item.get("question"), str) or not isinstance(item.get("answerable"), bool):
            raise ValueError(f"{path.name}:{no}: a line needs 'question' (text) and 'answerable' (true/false)")
        if item["answerable"] and not item.get("sections"):
            raise ValueError(f"{path.name}:{no}: an answerable question needs its 'sections'")
        items.append(item)
    return items


def in_section(passage: Passage, label: str) -> bool:
    """Whether a passage sits in a labelled section: "<note file>#<heading>" (at any depth of its path)."""
    note, _, heading = label.partition("#")
    return passage.note == note and heading in passage.heading_path


def observe(
    session: Session, encoder: Encoder, index: LoadedIndex, items: Sequence[dict[str, Any]]
) -> list[Observation]:
    """Retrieval and the head's features for every question, exactly as the ask path computes them."""
    vectors = encoder.encode([it["question"] for it in items])
    vocab = vocabulary(session, index)
    out = []
    for item, vector in zip(items, vectors, strict=True):
        found, x = assess(session, index, vocab, item["question"], vector)
        cited = found.hits[:PASSAGES]
        labels = item.get("sections") or []
        hit = any(in_section(h.passage, label) for h in cited for label in labels)
        top = [f"{h.passage.note}#{' > '.join(h.passage.heading_path)}" for h in cited]
        out.append(Observation(item, x, top, hit))
    return out


def figures(observations: Sequence[Observation], answered: Sequence[bool]) -> dict[str, Any]:
    """recall@3, abstention precision and recall, answered-and-supported, by style and kind."""
    answerable = [o for o in observations if o.answerable]
    refused = [o for o, a in zip(observations, answered, strict=True) if not a]
    gaps = [o for o in observations if not o.answerable]
    true_refusals = sum(1 for o in refused if not o.answerable)
    supported = sum(1 for o, a in zip(observations, answered, strict=True) if o.answerable and a and o.hit)
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for o, a in zip(observations, answered, strict=True):
        key = f"style:{o.item.get('style')}" if o.answerable else f"kind:{o.item.get('kind')}"
        by[key]["n"] += 1
        by[key]["right"] += int((a and o.hit) if o.answerable else not a)
    return {
        "questions": len(observations),
        "answerable": len(answerable),
        "unanswerable": len(gaps),
        "recall_at_3": round(sum(o.hit for o in answerable) / max(1, len(answerable)), 4),
        "abstention_precision": round(true_refusals / max(1, len(refused)), 4),
        "abstention_recall": round(true_refusals / max(1, len(gaps)), 4),
        "answered_and_supported": round(supported / max(1, len(answerable)), 4),
        "by_group": {k: {"n": v["n"], "right": round(v["right"] / v["n"], 3)} for k, v in sorted(by.items())},
    }


def decide(head: RelevanceHead, observations: Sequence[Observation]) -> list[bool]:
    """The head's answer/refuse decision for each question."""
    return [head.answers(o.x)[0] for o in observations]


def format_figures(f: dict[str, Any]) -> str:
    lines = [
        f"{f['questions']} questions ({f['answerable']} answerable, {f['unanswerable']} not covered by the notes)",
        f"recall@3                 {f['recall_at_3']:.3f}",
        f"abstention precision     {f['abstention_precision']:.3f}",
        f"abstention recall        {f['abstention_recall']:.3f}",
        f"answered and supported   {f['answered_and_supported']:.3f}",
        "right by style (answerable: answered and supported) and kind (refused):",
    ]
    lines += [f"  {k:24s} {v['right']:.3f}  (n={v['n']})" for k, v in f["by_group"].items()]
    return "\n".join(lines)
