"""Request models of the public grading API."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.grading.roles import MAX_SIDES, parse_sides
from app.quiz.schemas import MAX_ANSWER, not_blank
from contracts.text import PlainText

TEXT = 2000
LIST = 20


class Example(BaseModel):
    """A labelled example answer."""

    model_config = ConfigDict(extra="forbid")
    answer: PlainText = Field(min_length=1, max_length=TEXT)
    label: Literal["correct", "partial", "incorrect"]


PHRASE = 100


def _each_within(values: list[str], limit: int) -> list[str]:
    """The entries of a list field, each 1 to `limit` characters and not blank."""
    for value in values:
        if not value.strip() or len(value) > limit:
            raise ValueError(f"each entry must be 1 to {limit} characters and not blank")
    return values


class RoleIn(BaseModel):
    """One side of a two-sided answer: the names of its subject and the words that belong to it only
    ("sync SGD": "waits", "barrier"). An answer that gives one side only another side's words is
    graded a swap (docs/GRADING.md, "Authored roles")."""

    model_config = ConfigDict(extra="forbid")
    names: list[PlainText] = Field(min_length=1, max_length=LIST)
    cues: list[PlainText] = Field(min_length=1, max_length=50)
    implied: bool = Field(default=False, description="the side an answer that names no side speaks of")

    @field_validator("names", "cues")
    @classmethod
    def _phrases(cls, values: list[str]) -> list[str]:
        return _each_within(values, PHRASE)


def _checked_roles(roles: list[RoleIn]) -> None:
    """Two or more sides, no word on two of them, at most one implied (as data/roles.yaml is checked)."""
    if roles:
        parse_sides("roles", [r.model_dump() for r in roles])


class RubricIn(BaseModel):
    """A question to register once and grade many answers against."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "question": "What does reduce-scatter leave on each rank?",
                    "reference_answers": ["Each rank keeps one disjoint chunk of the reduced (summed) tensor"],
                    "wrong_answers": ["Every rank gets the full summed tensor"],
                    "examples": [{"answer": "a reduced shard per rank", "label": "correct"}],
                }
            ]
        },
    )
    question: PlainText = Field(min_length=1, max_length=TEXT)
    reference_answers: list[PlainText] = Field(min_length=1, max_length=LIST)
    wrong_answers: list[PlainText] = Field(default_factory=list, max_length=LIST)
    examples: list[Example] = Field(default_factory=list, max_length=200)
    explanation: PlainText | None = Field(default=None, max_length=4 * TEXT)
    roles: list[RoleIn] = Field(default_factory=list, max_length=MAX_SIDES)

    @field_validator("reference_answers", "wrong_answers")
    @classmethod
    def _texts(cls, values: list[str]) -> list[str]:
        return _each_within(values, TEXT)

    @model_validator(mode="after")
    def _roles(self) -> Self:
        _checked_roles(self.roles)
        return self


class GradeIn(BaseModel):
    """One answer to grade: against a bank question, a registered rubric, or a question given inline."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"question_id": "q_a0719b34b4ec", "answer": "it reduces and each rank keeps one shard"},
                {
                    "question": "What does all-gather do?",
                    "reference_answers": ["Every rank ends with the concatenation of all ranks' chunks"],
                    "answer": "everyone receives everybody's piece",
                },
                {"rubric_id": "r_9s8d7f6g5h4j3k2l1", "answer": "a reduced shard per rank"},
            ]
        },
    )
    answer: PlainText = Field(min_length=1, max_length=MAX_ANSWER, description=f"at most {MAX_ANSWER} characters")
    choice: PlainText | None = Field(default=None, max_length=8)
    question_id: PlainText | None = Field(default=None, max_length=64)
    rubric_id: PlainText | None = Field(default=None, max_length=64)
    question: PlainText | None = Field(default=None, min_length=1, max_length=TEXT)
    reference_answers: list[PlainText] | None = Field(default=None, min_length=1, max_length=LIST)
    wrong_answers: list[PlainText] = Field(default_factory=list, max_length=LIST)
    examples: list[Example] = Field(default_factory=list, max_length=200)
    roles: list[RoleIn] = Field(default_factory=list, max_length=MAX_SIDES)

    _blank = field_validator("answer")(not_blank)

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        given = [self.question_id is not None, self.rubric_id is not None, self.question is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of question_id, rubric_id, or question with reference_answers")
        if self.question is not None and not self.reference_answers:
            raise ValueError("reference_answers is required with question")
        if self.roles and self.question is None:
            raise ValueError("roles go with an inline question; register them with the rubric otherwise")
        _checked_roles(self.roles)
        return self

    def inline(self) -> RubricIn:
        """The inline question as a rubric request."""
        assert self.question is not None and self.reference_answers is not None
        return RubricIn(
            question=self.question,
            reference_answers=self.reference_answers,
            wrong_answers=self.wrong_answers,
            examples=self.examples,
            roles=self.roles,
        )


class BatchIn(BaseModel):
    """Up to 100 answers graded in one call."""

    model_config = ConfigDict(extra="forbid")
    items: list[GradeIn] = Field(min_length=1, max_length=100)
