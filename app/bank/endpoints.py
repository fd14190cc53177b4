"""HTTP routes of the bank: questions and topics."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from app.bank import repository
from app.bank.schemas import QuestionFull, QuestionOut, QuestionPage, TopicOut
from app.bank.views import author_view, learner_view
from app.deps import RuntimeDep, SessionDep
from app.errors import ForbiddenError
from app.keys.deps import OptionalApiKeyDep
from ingest.taxonomy import load_taxonomy

router = APIRouter(prefix="/v1", tags=["bank"])


@router.get("/questions", response_model=QuestionPage)
def list_questions(
    session: SessionDep,
    topic: Annotated[str | None, Query(max_length=64, description="topic id, see /v1/topics")] = None,
    q: Annotated[str | None, Query(max_length=200, description="words in the question text")] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> QuestionPage:
    """List bank questions as learners see them (no answers, no explanations)."""
    rows, total = repository.list_questions(session, topic=topic, q=q, offset=offset, limit=limit)
    items = [QuestionOut.model_validate(learner_view(r)) for r in rows]
    return QuestionPage(items=items, total=total, offset=offset, limit=limit)


@router.get("/questions/{question_id}", response_model=QuestionOut | QuestionFull)
def get_question(
    question_id: str,
    session: SessionDep,
    key: OptionalApiKeyDep,
    include: Annotated[
        Literal["answers"] | None, Query(description="'answers' needs an API key with the author scope")
    ] = None,
) -> QuestionOut | QuestionFull:
    """One question as a learner sees it; with include=answers and an author key, everything about it."""
    question = repository.get_question(session, question_id)
    if include == "answers":
        if key is None or "author" not in key.scopes:
            raise ForbiddenError("include=answers needs an API key with the author scope (X-API-Key)")
        return QuestionFull.model_validate(author_view(question))
    return QuestionOut.model_validate(learner_view(question))


@router.get("/topics", response_model=list[TopicOut])
def list_topics(session: SessionDep, runtime: RuntimeDep) -> list[TopicOut]:
    """The taxonomy's topics with question counts."""
    counts = repository.topic_counts(session)
    taxonomy = load_taxonomy(runtime.settings.taxonomy_path)
    known = [TopicOut(id=t.id, name=t.name, count=counts.get(t.id, 0)) for t in taxonomy.topics]
    extra = [TopicOut(id=t, name=t, count=n) for t, n in sorted(counts.items()) if t not in taxonomy.by_id]
    return known + extra
