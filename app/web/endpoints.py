"""The study page, the widget script, and the study notes and passages the page reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse

from app.bank.repository import list_questions
from app.deps import SessionDep
from app.errors import NotFoundError
from app.web.notes import passage_place, topic_notes

STATIC = Path(__file__).resolve().parent / "static"
ASSETS = {"study.js": "text/javascript", "study.css": "text/css"}
# The page runs only its own scripts; charts arrive as data: images; the widget's styles sit in its shadow root.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)

router = APIRouter(tags=["web"])


@router.get("/", include_in_schema=False)
def study_page() -> FileResponse:
    """The study page: topics, a reading pane and the chat widget."""
    return FileResponse(STATIC / "index.html", media_type="text/html", headers={"Content-Security-Policy": PAGE_CSP})


@router.get("/widget.js", include_in_schema=False)
def widget() -> FileResponse:
    """The embeddable chat widget: one script tag on any page."""
    return FileResponse(STATIC / "widget.js", media_type="text/javascript", headers={"Cache-Control": "max-age=300"})


@router.get("/static/{name}", include_in_schema=False)
def asset(name: str) -> FileResponse:
    """The study page's own script and styles."""
    if name not in ASSETS:
        raise NotFoundError(f"no asset {name!r}")
    return FileResponse(STATIC / name, media_type=ASSETS[name])


@router.get("/v1/study/topics/{topic_id}", tags=["study"])
def topic_study(topic_id: str, session: SessionDep) -> dict[str, Any]:
    """A topic's study notes (rendered safely, with a table of contents and the questions each section
    explains) and the topic's questions."""
    rows, total = list_questions(session, topic=topic_id)
    notes = topic_notes(session, topic_id)
    if not total and not notes:
        raise NotFoundError(f"no notes or questions on topic {topic_id!r}", details={"topic": topic_id})
    return {"topic": topic_id, "questions": [{"id": q.id, "text": q.text} for q in rows], "notes": notes}


@router.get("/v1/study/passages/{passage_id}", tags=["study"])
def passage(passage_id: str, session: SessionDep) -> dict[str, Any]:
    """Where a cited passage is read: its topic, note, section and anchor on the study page."""
    place = passage_place(session, passage_id)
    if place is None:
        raise NotFoundError(f"no passage {passage_id!r}", details={"passage_id": passage_id})
    return place
