"""What a chat turn works with: the database session, the runtime, the demo runner and the vocabulary."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from app.chat.demos import DemoRunner
from app.chat.replies import Reply
from app.chat.store import DialogueState
from app.chat.vocab import Vocabulary
from app.models import Conversation
from app.serving.runtime import Runtime


@dataclass
class Context:
    """One turn's collaborators and the conversation being answered."""

    session: Session
    runtime: Runtime
    runner: DemoRunner
    vocab: Vocabulary
    conversation: Conversation
    state: DialogueState

    @property
    def learner_id(self) -> str:
        """The conversation's learner."""
        return self.conversation.learner_id


@dataclass
class Turn:
    """The tutor's replies to one message, and a demo run to follow afterwards if one was started."""

    replies: list[Reply] = field(default_factory=list)
    demo_run: tuple[str, str] | None = None  # (run id, demo name)
