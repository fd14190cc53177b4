"""Grade an answer to a bank question and attach everything a learner needs to trust the verdict."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.answers.grounding import MATERIAL
from app.answers.rubrics import RubricBook
from app.bank.repository import get_question
from app.bank.views import source_of
from app.grading import GradeResult, Rubric, grade
from app.models import Question
from contracts.demos import demos_for
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


def misconception_text(result: GradeResult) -> str | None:
    """A sentence naming the matched wrong answer, if the grader matched one."""
    if not result.matched_misconception:
        return None
    return f"This is the misconception that {result.matched_misconception[0].lower()}{result.matched_misconception[1:]}"


def question_view(session: Session, index: LoadedIndex, question: Question, rubric: Rubric) -> dict[str, Any]:
    """What a verdict on this question always carries: accepted answer, grounded explanation, citation..."""
    material = MATERIAL.material(session, index, question, rubric.question_vec)
    return {
        "question_id": question.id,
        "accepted_answer": question.accepted_answers[0],
        "explanation": material["explanation"],
        "caveats": list(question.notes),
        "citation": source_of(question),
        "related_questions": material["related_questions"],
        "related_demos": demos_for(question.topics),
    }


def verdict_view(view: dict[str, Any], result: GradeResult, model_id: str) -> dict[str, Any]:
    """The full grading result: verdict and evidence, then the question's grounded material (`question_view`)."""
    return {
        "question_id": view["question_id"],
        "verdict": result.verdict,
        "score": round(result.score, 4),
        "confidence": round(result.confidence, 4),
        "feedback": result.feedback,
        "matched_answer": result.matched_answer,
        "matched_misconception": result.matched_misconception,
        "misconception": misconception_text(result),
        "covered_ideas": result.covered_ideas,
        "missing_ideas": result.missing_ideas,
        "flags": result.flags,
        **{k: v for k, v in view.items() if k != "question_id"},
        "grader_version": result.grader_version,
        "model": model_id,
    }


def payload(
    session: Session, index: LoadedIndex, question: Question, rubric: Rubric, result: GradeResult, model_id: str
) -> dict[str, Any]:
    """The full grading result: verdict, evidence, grounded explanation, caveats, related material."""
    return verdict_view(question_view(session, index, question, rubric), result, model_id)


def grade_bank_answer(
    session: Session,
    book: RubricBook,
    encoder: Encoder,
    index: LoadedIndex,
    question_id: str,
    answer: str,
    choice: str | None = None,
) -> tuple[Question, GradeResult, dict[str, Any]]:
    """Grade one answer to a bank question: one encoder call for the answer."""
    question = get_question(session, question_id)
    rubric = book.get(session, question)
    result = grade(rubric, answer, encoder, choice=choice)
    return question, result, payload(session, index, question, rubric, result, encoder.model_id)
