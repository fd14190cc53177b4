"""Request and response models of the chat API."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.chat.replies import Reply
from contracts.text import PlainText

MAX_MESSAGE = 2000


class ChatIn(BaseModel):
    """A learner's message; without a conversation id it goes to the learner's latest conversation."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"message": "quiz me on pipeline parallelism", "conversation_id": None}]},
    )
    message: PlainText = Field(min_length=1, max_length=MAX_MESSAGE)
    conversation_id: PlainText | None = Field(default=None, max_length=64)

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty or only spaces")
        return value


class ChatOut(BaseModel):
    """The tutor's replies; `token` is set only when this request issued a new learner token."""

    conversation_id: str
    token: str | None = None
    replies: list[Reply]


class MessageOut(BaseModel):
    """One stored message of a conversation."""

    id: int
    role: str
    text: str
    reply: dict[str, Any] | None = None
    created_at: str


class ConversationOut(BaseModel):
    """A conversation with its latest messages, oldest first."""

    id: str
    token: str | None = None
    created_at: str
    messages: list[MessageOut]


class ConversationSummary(BaseModel):
    """A conversation in a learner's list."""

    id: str
    created_at: str
    updated_at: str
