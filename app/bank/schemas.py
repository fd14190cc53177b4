"""Response models of the bank endpoints."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Source(BaseModel):
    """Where a question comes from, for citations."""

    file: str = Field(examples=["003_28df717c268ee6dd.txt"])
    number: int = Field(examples=[9])
    lines: list[int] = Field(description="first and last line", examples=[[163, 181]])


class Option(BaseModel):
    """A multiple-choice option as shown to learners (unmarked)."""

    key: str = Field(examples=["B"])
    text: str


class QuestionOut(BaseModel):
    """A question as a learner sees it."""

    id: str = Field(examples=["q_a0719b34b4ec"])
    question: str = Field(examples=["What is reduce-scatter and how is it used in FSDP?"])
    topics: list[str] = Field(examples=[["zero-fsdp", "collectives"]])
    concept_id: str
    source: Source
    options: list[Option] = []


class QuestionFull(QuestionOut):
    """A question with its answers, explanation and notes (author keys only)."""

    accepted_answers: list[str]
    extra_answers: list[str]
    wrong_options: list[str]
    explanation: str | None
    notes: list[str]
    examples: list[dict[str, Any]]
    layout: str
    status: str


class QuestionPage(BaseModel):
    """One page of questions."""

    items: list[QuestionOut]
    total: int
    offset: int
    limit: int


class TopicOut(BaseModel):
    """A taxonomy topic with how many questions carry it."""

    id: str = Field(examples=["collectives"])
    name: str = Field(examples=["NCCL and collectives"])
    count: int
