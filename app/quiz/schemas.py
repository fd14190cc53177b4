"""Request and response models of quiz sessions and answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.bank.schemas import QuestionOut
from contracts.text import PlainText

MAX_ANSWER = 2000


def not_blank(value: str) -> str:
    """Refuse text that is empty once spaces are stripped."""
    if not value.strip():
        raise ValueError("must not be empty or only spaces")
    return value


class SessionIn(BaseModel):
    """A quiz session request."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "learner_id": "l_3q2dX0b2dC6e6U2n1bXy8w",
                    "topics": ["pipeline-parallelism"],
                    "length": 5,
                    "mode": "adaptive",
                }
            ]
        },
    )
    learner_id: PlainText = Field(min_length=1, max_length=64)
    topics: list[PlainText] = Field(default_factory=list, max_length=20)
    length: int = Field(default=10, ge=1, le=50)
    mode: Literal["new", "review", "adaptive"] = "adaptive"


class Progress(BaseModel):
    """Where a session stands."""

    answered: int
    correct: int
    partial: int
    incorrect: int
    remaining: int
    length: int
    done: bool


class SessionOut(BaseModel):
    """A quiz session."""

    id: str
    learner_id: str
    mode: str
    topics: list[str]
    length: int
    progress: Progress


class NextOut(BaseModel):
    """The next question, or done with the reason."""

    done: bool
    reason: str | None = None
    question: QuestionOut | None = None
    progress: Progress


class AnswerIn(BaseModel):
    """A learner's answer to the session's current question."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "question_id": "q_a0719b34b4ec",
                    "answer": "it sums the gradients and leaves each rank with its own shard",
                }
            ]
        },
    )
    question_id: PlainText = Field(min_length=1, max_length=64)
    answer: PlainText = Field(min_length=1, max_length=MAX_ANSWER, description=f"at most {MAX_ANSWER} characters")
    choice: PlainText | None = Field(default=None, max_length=8, description="an option key such as 'B'")

    _blank = field_validator("answer")(not_blank)


class AnswerOut(BaseModel):
    """The full grading result plus the session's progress."""

    model_config = ConfigDict(extra="allow")
    attempt_id: str
    question_id: str
    verdict: Literal["correct", "partial", "incorrect"]
    score: float
    confidence: float
    feedback: str
    matched_answer: str | None
    matched_misconception: str | None
    misconception: str | None
    covered_ideas: list[str]
    missing_ideas: list[str]
    flags: list[str]
    explanation: dict[str, Any]
    caveats: list[str]
    citation: dict[str, Any]
    related_questions: list[dict[str, Any]]
    related_demos: list[dict[str, Any]]
    schedule: dict[str, Any]
    progress: Progress
    replayed: bool
