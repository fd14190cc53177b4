"""A chat turn end to end: who is talking, which conversation, the tutor's replies, stored and streamed.

What the tutor says is decided in `tutor.py`; nothing here depends on the intent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.chat.context import Bank, Context
from app.chat.demos import DemoRunner
from app.chat.store import DialogueState, add_message, issue_learner, learner_for_token, open_conversation
from app.chat.tutor import demo_events, respond
from app.chat.vocab import vocabulary
from app.config import Settings
from app.db import transaction
from app.errors import TutorError
from app.models import Conversation

log = logging.getLogger(__name__)
Event = tuple[str, dict[str, Any]]


class Tutor(Bank, Protocol):
    """What a chat turn needs of the serving process (the runtime provides it): the bank, the settings
    (the taxonomy, the longest answer graded) and the database, for a streamed turn's own transactions."""

    settings: Settings
    factory: sessionmaker[Session]


def identify(session: Session, token: str | None) -> tuple[str, str | None]:
    """(learner id, the new token if one was issued): a known token's learner, or a new learner."""
    if token:
        return learner_for_token(session, token), None
    return issue_learner(session)


def begin(session: Session, token: str | None, conversation_id: str | None) -> tuple[Conversation, str | None]:
    """The conversation a message goes to, and the new token if the learner is new."""
    learner_id, issued = identify(session, token)
    return open_conversation(session, learner_id, conversation_id), issued


def _turn(session: Session, tutor: Tutor, runner: DemoRunner, conversation: Conversation, text: str) -> Any:
    add_message(session, conversation, "learner", text)
    settings = tutor.settings
    ctx = Context(session, tutor, runner, vocabulary(settings.taxonomy_path), conversation,
                  DialogueState.of(conversation), settings.max_answer_chars)
    turn = respond(ctx, text)
    replies = [r.model_dump(mode="json") for r in turn.replies]
    for reply in replies:
        add_message(session, conversation, "tutor", reply["text"], reply)
    return replies, turn.demo_run


def run_turn(session: Session, tutor: Tutor, runner: DemoRunner, conversation: Conversation, text: str
             ) -> Iterator[Event]:
    """A turn in one transaction (the caller's): the replies, then a started demo's progress and chart."""
    replies, demo_run = _turn(session, tutor, runner, conversation, text)
    yield from (("reply", r) for r in replies)
    if demo_run:
        for name, data in demo_events(runner, *demo_run):
            if name == "reply":
                add_message(session, conversation, "tutor", data["text"], data)
            yield name, data


def stream_turn(tutor: Tutor, runner: DemoRunner, conversation_id: str, text: str) -> Iterator[Event]:
    """A turn for streaming: the replies are committed before they are sent, then the demo follows."""
    with transaction(tutor.factory) as session:
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            raise TutorError("the conversation disappeared")
        replies, demo_run = _turn(session, tutor, runner, conversation, text)
    yield from (("reply", r) for r in replies)
    if not demo_run:
        return
    for name, data in demo_events(runner, *demo_run):
        if name == "reply":
            with transaction(tutor.factory) as session:
                conversation = session.get(Conversation, conversation_id)
                if conversation is not None:
                    add_message(session, conversation, "tutor", data["text"], data)
        yield name, data


def sse(event: str, data: dict[str, Any]) -> str:
    """One server-sent event frame."""
    return f"event: {event}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"


def sse_stream(meta: dict[str, Any], events: Iterator[Event]) -> Iterator[str]:
    """meta, then the turn's events, then done; a failure becomes an 'error' event (the stream has started)."""
    yield sse("meta", meta)
    try:
        for name, data in events:
            yield sse(name, data)
    except TutorError as exc:
        yield sse("error", {"code": exc.code, "message": exc.message})
    except Exception:
        log.exception("chat turn failed")
        yield sse("error", {"code": "internal", "message": "something went wrong; please try again"})
    yield sse("done", {"conversation_id": meta["conversation_id"]})
