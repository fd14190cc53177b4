"""Request and response models of learners."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from contracts.text import PlainText


class LearnerIn(BaseModel):
    """A new learner; the name is optional and only for display."""

    model_config = ConfigDict(extra="forbid")
    display_name: PlainText | None = Field(default=None, max_length=100)


class LearnerOut(BaseModel):
    """A learner's opaque id (keep it: it is the learner's key to their progress)."""

    id: str = Field(examples=["l_3q2dX0b2dC6e6U2n1bXy8w"])
    display_name: str | None = None
