"""Study notes as the study page shows them: Markdown rendered safely, headings as a table of
contents, every passage an anchor a citation can open.

Notes come from authors, including any folder an author adds with `tutor ingest`, so their Markdown
is untrusted. It is rendered by markdown-it-py with raw HTML off (a `<script>` in a note shows as
text), and the result then passes nh3 (the ammonia sanitiser) with an allow-list of tags and of
URL schemes, so a `javascript:` link or an `onerror` attribute cannot survive either step.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import nh3
from markdown_it import MarkdownIt
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import ACTIVE, Passage, Question, QuestionPassage

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
TAGS = {
    "p", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "a", "br", "hr", "sub", "sup",
    "table", "thead", "tbody", "tr", "th", "td", "del",
}
ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


def render_markdown(text: str) -> str:
    """A note passage's Markdown as HTML that can neither run script nor load anything but links."""
    html = _MARKDOWN.render(text)
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer nofollow")


def anchor(note: str, heading_path: list[str]) -> str:
    """A stable element id for a note's section: the note's name and the headings, lower-case, dashed."""
    words = re.sub(r"[^a-z0-9]+", "-", " ".join([note.removesuffix(".md"), *heading_path]).lower()).strip("-")
    return "n-" + (words or "note")


def passage_anchor(passage_id: str) -> str:
    """The element id of a passage on the study page (citations link to `/#passage=<id>`)."""
    return f"passage-{passage_id}"


def _references(passages: list[Passage]) -> list[dict[str, Any]]:
    """The references the note's passages cite, once each, in order of first citation."""
    seen: dict[str, dict[str, Any]] = {}
    for p in passages:
        for ref in p.citations:
            seen.setdefault(ref["id"], {k: v for k, v in ref.items() if k != "locators"})
    return list(seen.values())


def note_view(note: str, passages: list[Passage], questions: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    """One note: title, table of contents, blocks (headings and rendered passages) and references.

    `questions` maps a passage id to the bank questions it explains; each section lists them.
    """
    toc: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    current: list[str] = []
    for p in passages:
        path = list(p.heading_path)
        if path != current:
            common = 0
            while common < min(len(path), len(current)) and path[common] == current[common]:
                common += 1
            for depth in range(common, len(path)):
                heading = {"anchor": anchor(note, path[: depth + 1]), "text": path[depth], "level": depth + 1}
                toc.append(heading)
                blocks.append({"type": "heading", **heading, "questions": []})
            current = path
        section = next((b for b in reversed(blocks) if b["type"] == "heading"), None)
        for q in questions.get(p.id, []):
            if section is not None and q not in section["questions"]:
                section["questions"].append(q)
        blocks.append({"type": "passage", "id": p.id, "anchor": passage_anchor(p.id), "html": render_markdown(p.text),
                       "lines": [p.line_start, p.line_end]})
    return {"note": note, "title": passages[0].title, "toc": toc, "blocks": blocks,
            "references": _references(passages)}


def topic_notes(session: Session, topic: str) -> list[dict[str, Any]]:
    """Every live note passage on a topic, as note views in file order."""
    rows = [p for p in session.scalars(select(Passage).where(Passage.status == ACTIVE)) if topic in p.topics]
    by_note: dict[str, list[Passage]] = defaultdict(list)
    for p in sorted(rows, key=lambda p: (p.note, p.position)):
        by_note[p.note].append(p)
    links = session.execute(
        select(QuestionPassage.passage_id, Question.id, Question.text)
        .join(Question, Question.id == QuestionPassage.question_id)
        .where(QuestionPassage.passage_id.in_([p.id for p in rows]), Question.status == ACTIVE)
        .order_by(Question.document, Question.number)
    )
    questions: dict[str, list[dict[str, str]]] = defaultdict(list)
    for passage_id, question_id, text in links:
        questions[passage_id].append({"id": question_id, "text": text})
    return [note_view(note, passages, questions) for note, passages in by_note.items()]


def passage_place(session: Session, passage_id: str) -> dict[str, Any] | None:
    """Where a passage is read: its topic, note and anchors; None for no live passage."""
    p = session.get(Passage, passage_id)
    if p is None or p.status != ACTIVE:
        return None
    return {"id": p.id, "topic": p.topics[0] if p.topics else None, "topics": list(p.topics), "note": p.note,
            "title": p.title, "heading_path": list(p.heading_path), "anchor": passage_anchor(p.id),
            "section_anchor": anchor(p.note, list(p.heading_path)), "lines": [p.line_start, p.line_end]}
