"""Grade answers for other applications; every graded answer is stored as an attempt."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import numpy as np
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.answers.cache import BankCache, BankEntry
from app.answers.rubrics import RubricBook
from app.answers.service import verdict_view
from app.db import transaction
from app.errors import NotFoundError
from app.grade_api.schemas import GradeIn, RubricIn
from app.grading import GradeResult, GradingItem, Rubric, plan_many, prepare_many
from app.grading.grader import Plan
from app.ids import new_id
from app.keys.service import Caller
from app.models import StoredRubric, utcnow
from app.serving.aio import SingleFlight, encode
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


class Bank(Protocol):
    """What grading calls need of the serving process (the runtime provides it): the database,
    the bank questions' cache and its single-flight reads, and the grader of the live index."""

    factory: sessionmaker[Session]
    questions: BankCache
    question_reads: SingleFlight[tuple[str, str], BankEntry]

    def grading(self) -> tuple[Encoder, LoadedIndex, RubricBook]:
        """The encoder, index and rubrics of one load, or a 503 error."""
        ...


def _item(body: RubricIn) -> GradingItem:
    return GradingItem(
        question=body.question,
        reference_answers=list(body.reference_answers),
        wrong_answers=list(body.wrong_answers),
        explanation=body.explanation,
        examples=[(e.answer, e.label) for e in body.examples],
        roles=[r.model_dump() for r in body.roles],
    )


def register_rubric(session: Session, book: RubricBook, key: Caller, body: RubricIn) -> StoredRubric:
    """Precompute and store everything about a client's question.

    Its texts go through the cache of clients' texts (`CachedEncoder.inline`), bounded and expiring: the
    rubric row keeps every vector it needs, so the cache only saves embedding the same texts twice.
    """
    encoder = book.encoder.inline()
    (rubric,) = prepare_many([_item(body)], encoder)
    row = StoredRubric(
        id=new_id("r"),
        api_key_id=key.id,
        question=body.question,
        reference_answers=list(body.reference_answers),
        wrong_answers=list(body.wrong_answers),
        examples=[e.model_dump() for e in body.examples],
        prepared=rubric.to_dict(),
        model_id=encoder.model_id,
        grader_version=rubric.version,
    )
    session.add(row)
    session.flush()
    return row


def load_rubric(session: Session, key: Caller, rubric_id: str) -> StoredRubric:
    """A stored rubric that belongs to the calling key, or 404."""
    row = session.get(StoredRubric, rubric_id)
    if row is None or row.api_key_id != key.id:
        raise NotFoundError(f"no rubric with id {rubric_id!r}", details={"id": rubric_id})
    return row


def generic_view(result: GradeResult, model_id: str) -> dict[str, Any]:
    """A verdict for a question that is not in the bank."""
    return {**result.to_dict(), "model": model_id}


class _Target:
    """What one request item is graded against: a rubric, and for a bank question its grounded view."""

    def __init__(self, rubric: Rubric, view: dict[str, Any] | None = None, rubric_id: str | None = None) -> None:
        self.rubric, self.view, self.rubric_id = rubric, view, rubric_id


Resolved = _Target | NotFoundError


async def _targets(bank: Bank, index: LoadedIndex, book: RubricBook, key: Caller, items: list[GradeIn],
                   strict: bool) -> list[Resolved]:
    """Each item's target: bank questions from the runtime's cache, else read once for every request that
    asks for them at the same time (`question_reads`); registered rubrics and inline questions on a worker thread."""
    out: list[Resolved | None] = [None] * len(items)
    for i, item in enumerate(items):
        entry = bank.questions.get(index, item.question_id) if item.question_id is not None else None
        if entry is not None:
            out[i] = _Target(entry.rubric, view=entry.view)
    asked = [i for i, t in enumerate(out) if t is None and items[i].question_id is not None]
    if asked:
        keys = [(index.version, str(items[i].question_id)) for i in asked]
        entries = await bank.question_reads.load_many(keys, partial(_read_questions, bank, index, book))
        for i, read in zip(asked, entries, strict=True):
            if isinstance(read, NotFoundError) and not strict:
                out[i] = read
            elif isinstance(read, BaseException):
                raise read
            else:
                out[i] = _Target(read.rubric, view=read.view)
    rest = [i for i, t in enumerate(out) if t is None]
    if rest:
        found = await run_in_threadpool(_resolve, bank, book, key, [items[i] for i in rest], strict)
        for i, target in zip(rest, found, strict=True):
            out[i] = target
    return [t for t in out if t is not None]


def _read_questions(bank: Bank, index: LoadedIndex, book: RubricBook,
                    keys: list[tuple[str, str]]) -> dict[tuple[str, str], BankEntry | Exception]:
    """Bank questions by (index version, id), in one transaction; an unknown one is its own NotFoundError."""
    out: dict[tuple[str, str], BankEntry | Exception] = {}
    with transaction(bank.factory) as session:
        for version_and_id in keys:
            try:
                out[version_and_id] = bank.questions.load(session, index, book, version_and_id[1])
            except NotFoundError as exc:
                out[version_and_id] = exc
    return out


def _resolve(bank: Bank, book: RubricBook, key: Caller, items: list[GradeIn], strict: bool) -> list[Resolved]:
    """Registered rubrics (read in one transaction) and inline questions (prepared in one batch, their texts
    through the bounded, expiring cache of clients' texts: `CachedEncoder.inline`)."""
    out: list[Resolved | None] = []
    inline: list[int] = []
    with transaction(bank.factory) as session:
        for i, item in enumerate(items):
            try:
                if item.rubric_id is not None:
                    row = load_rubric(session, key, item.rubric_id)
                    out.append(_Target(Rubric.from_dict(row.prepared), rubric_id=row.id))
                else:
                    out.append(None)
                    inline.append(i)
            except NotFoundError as exc:
                if strict:
                    raise
                out.append(exc)
    if inline:
        prepared = prepare_many([_item(items[i].inline()) for i in inline], book.encoder.inline())
        for i, rubric in zip(inline, prepared, strict=True):
            out[i] = _Target(rubric)
    return [t for t in out if t is not None]


@dataclass
class Prepared:
    """Items resolved and checked, waiting for their answers' vectors (`texts`) to be graded."""

    key: Caller
    encoder: Encoder  # the runtime's, as it was when the items were resolved
    items: list[GradeIn]
    targets: list[Resolved]
    graded: list[int]
    plan: Plan

    @property
    def model_id(self) -> str:
        """The encoder's model, named in every result and attempt."""
        return self.encoder.model_id

    @property
    def texts(self) -> list[str]:
        """The texts to encode (answers that no check has settled)."""
        return self.plan.texts

    def finish(self, vectors: np.ndarray) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The results in item order and the attempt rows to store. Pure: safe on any thread."""
        results = dict(zip(self.graded, self.plan.finish(vectors), strict=True))
        out: list[dict[str, Any]] = []
        attempts: list[dict[str, Any]] = []
        for i, target in enumerate(self.targets):
            if isinstance(target, NotFoundError):
                out.append({"error": {"code": target.code, "message": target.message, "details": target.details}})
                continue
            result = results[i]
            if target.view is not None:
                view = verdict_view(target.view, result, self.model_id)
            else:
                view = generic_view(result, self.model_id)
            attempt = {
                "id": new_id("a"),
                "question_id": target.view["question_id"] if target.view is not None else None,
                "rubric_id": target.rubric_id,
                "api_key_id": self.key.id,
                "answer": self.items[i].answer,
                "choice": self.items[i].choice,
                "verdict": result.verdict,
                "score": result.score,
                "confidence": result.confidence,
                "result": view,
                "grader_version": result.grader_version,
                "model_id": self.model_id,
                "created_at": utcnow(),  # graded now, whenever the journal stores it
            }
            attempts.append(attempt)
            out.append({**view, "attempt_id": attempt["id"]})
        return out, attempts


async def prepare_items(bank: Bank, key: Caller, items: list[GradeIn], *, strict: bool = False) -> Prepared:
    """Resolve each item's target (caches first, the database for the rest) and run the checks
    that need no encoder; per-item errors stay per item unless strict."""
    encoder, index, book = bank.grading()
    targets = await _targets(bank, index, book, key, items, strict)
    graded = [i for i, t in enumerate(targets) if isinstance(t, _Target)]
    rubrics = [t.rubric for t in targets if isinstance(t, _Target)]
    plan = plan_many(rubrics, [items[i].answer for i in graded], [items[i].choice for i in graded])
    return Prepared(key, encoder, items, targets, graded, plan)


async def grade_items(
    bank: Bank, key: Caller, items: list[GradeIn], *, strict: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Grade items with one batched encode for the answers; per-item errors stay per item unless strict.

    Returns the results and the attempt rows to store (the caller writes them with its usage count).
    On the event loop: the encode is awaited from the micro-batcher, the database is read only for
    what the runtime's caches do not hold.
    """
    prepared = await prepare_items(bank, key, items, strict=strict)
    vectors = await encode(prepared.encoder, prepared.texts)
    return await run_in_threadpool(prepared.finish, vectors)  # the pair judge's pass, off the event loop
