"""Chat persistence: learner tokens, conversations with their dialogue state, and messages."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import NotFoundError, UnauthorizedError
from app.ids import new_id
from app.learners.service import create_learner
from app.models import ChatMessage, ChatToken, Conversation, as_utc, utcnow

TOKEN_PREFIX = "ct_"
HISTORY_LIMIT = 200


@dataclass
class DialogueState:
    """Where a conversation stands: the quiz it runs, the difficulty level, hints given, the last question."""

    quiz_session_id: str | None = None
    topics: list[str] = field(default_factory=list)
    level: int = 0  # 0: multiple choice shows its options; 1 ("harder"): answer in your own words
    hints: int = 0  # hints given for the pending question
    last_question_id: str | None = None  # the last question answered or skipped, for "why?"
    focus_topics: list[str] = field(default_factory=list)  # topics of the latest question, for "show me"

    @classmethod
    def of(cls, conversation: Conversation) -> DialogueState:
        """The state stored on a conversation (unknown keys from older versions are ignored)."""
        known = {k: v for k, v in (conversation.state or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def save(self, conversation: Conversation) -> None:
        """Write the state back (a new dict, so the JSON column is seen as changed)."""
        conversation.state = asdict(self)
        conversation.updated_at = utcnow()


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_learner(session: Session) -> tuple[str, str]:
    """A new learner and their opaque chat token (returned once; only its hash is kept)."""
    learner = create_learner(session)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ChatToken(token_hash=hash_token(token), learner_id=learner.id))
    session.flush()
    return learner.id, token


def learner_for_token(session: Session, token: str) -> str:
    """The learner a token belongs to, or 401."""
    row = session.get(ChatToken, hash_token(token)) if token.startswith(TOKEN_PREFIX) else None
    if row is None:
        raise UnauthorizedError("unknown chat token: start a new conversation without a token to get one")
    return row.learner_id


def new_conversation(session: Session, learner_id: str) -> Conversation:
    """A fresh conversation for the learner."""
    conversation = Conversation(id=new_id("c"), learner_id=learner_id, state=asdict(DialogueState()))
    session.add(conversation)
    session.flush()
    return conversation


def owned_conversation(session: Session, learner_id: str, conversation_id: str) -> Conversation:
    """The learner's conversation by id; 404 if there is none or it is someone else's (another
    learner's conversation does not exist for this one: its existence is not disclosed)."""
    conversation = session.get(Conversation, conversation_id)
    if conversation is None or conversation.learner_id != learner_id:
        raise NotFoundError(f"no conversation with id {conversation_id!r}", details={"id": conversation_id})
    return conversation


def open_conversation(session: Session, learner_id: str, conversation_id: str | None) -> Conversation:
    """The named conversation, else the learner's latest one, else a new one."""
    if conversation_id:
        return owned_conversation(session, learner_id, conversation_id)
    latest = session.scalars(
        select(Conversation).where(Conversation.learner_id == learner_id).order_by(Conversation.updated_at.desc())
    ).first()
    return latest or new_conversation(session, learner_id)


def add_message(session: Session, conversation: Conversation, role: str, text: str, reply: Any = None) -> ChatMessage:
    """Append a message (the learner's text, or a tutor reply with its structure)."""
    message = ChatMessage(conversation_id=conversation.id, role=role, text=text, reply=reply)
    session.add(message)
    conversation.updated_at = utcnow()
    session.flush()
    return message


def message_view(message: ChatMessage) -> dict[str, Any]:
    """A message as clients see it."""
    return {
        "id": message.id,
        "role": message.role,
        "text": message.text,
        "reply": message.reply,
        "created_at": as_utc(message.created_at).isoformat(),
    }


def history(session: Session, conversation: Conversation, limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """The conversation's latest messages, oldest first."""
    rows = session.scalars(
        select(ChatMessage)
        .where(ChatMessage.conversation_id == conversation.id)
        .order_by(ChatMessage.id.desc())
        .limit(limit)
    )
    return [message_view(m) for m in reversed(list(rows))]
