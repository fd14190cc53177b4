"""Request and response models of appeals."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.text import PlainText


class AppealIn(BaseModel):
    """The learner's claim about an attempt's verdict."""

    model_config = ConfigDict(extra="forbid")
    claimed_verdict: Literal["correct", "partial"] = "correct"
    comment: PlainText | None = Field(default=None, max_length=1000)
    learner_id: PlainText | None = Field(
        default=None, max_length=64,
        description="the learner who made the attempt (their opaque id); a grading API attempt is appealed with "
                    "its own X-API-Key instead")


class AppealOut(BaseModel):
    """An appeal with both verdicts."""

    id: str
    attempt_id: str
    question_id: str | None
    answer: str | None
    original_verdict: str
    claimed_verdict: str
    comment: str | None
    status: str
    created_at: datetime
    rescheduled: bool | None = None
