"""What a chat turn works with: the database session, the live bank, the demo runner and the vocabulary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.orm import Session

from app.answers.rubrics import RubricBook
from app.chat.demos import DemoRunner
from app.chat.replies import Reply
from app.chat.store import DialogueState
from app.chat.vocab import Vocabulary
from app.models import Conversation
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


class Bank(Protocol):
    """What a chat turn needs of the serving process (the runtime provides it): the encoder that
    recognises intents, and the live index (with its rubrics) for asks and answers."""

    encoder: Encoder | None

    def require(self) -> tuple[Encoder, LoadedIndex]:
        """The encoder and index, or a 503 error."""
        ...

    def grading(self) -> tuple[Encoder, LoadedIndex, RubricBook]:
        """The encoder, index and rubrics of one load, or a 503 error."""
        ...


@dataclass
class Context:
    """One turn's collaborators and the conversation being answered."""

    session: Session
    bank: Bank
    runner: DemoRunner
    vocab: Vocabulary
    conversation: Conversation
    state: DialogueState
    max_answer_chars: int  # longer answers are cut to this before grading

    @property
    def learner_id(self) -> str:
        """The conversation's learner."""
        return self.conversation.learner_id


@dataclass
class Turn:
    """The tutor's replies to one message, and a demo run to follow afterwards if one was started."""

    replies: list[Reply] = field(default_factory=list)
    demo_run: tuple[str, str] | None = None  # (run id, demo name)
