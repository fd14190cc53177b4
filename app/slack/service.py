"""What the bot does, on top of the tutor's domain services: quizzes, graded answers, appeals, asks, stats."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.answers.rubrics import RubricBook
from app.appeals.service import file_appeal
from app.ask.service import ask
from app.chat.text import tokens
from app.chat.vocab import vocabulary
from app.db import transaction
from app.errors import NotFoundError
from app.learners.progress import progress
from app.learners.service import learner_for_ref
from app.quiz.service import create_session, get_session, next_question, submit_answer
from app.slack import repository as repo
from app.slack.repository import DAILY, QUIZ
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


class Bank(Protocol):
    """What grading an answer and asking need of the serving process (the runtime provides it):
    the database and the live index with its rubrics."""

    factory: sessionmaker[Session]

    def require(self) -> tuple[Encoder, LoadedIndex]:
        """The encoder and index, or a 503 error."""
        ...

    def grading(self) -> tuple[Encoder, LoadedIndex, RubricBook]:
        """The encoder, index and rubrics of one load, or a 503 error."""
        ...


@dataclass(frozen=True)
class Who:
    """A Slack user in a workspace; they map onto one tutor learner per workspace."""

    team_id: str
    user_id: str
    name: str | None = None

    @property
    def ref(self) -> str:
        """The learner's external reference."""
        return f"slack:{self.team_id}:{self.user_id}"


@dataclass(frozen=True)
class Where:
    """A thread: the channel and the ts of the bot's question message at its root."""

    team_id: str
    channel_id: str
    thread_ts: str


@dataclass(frozen=True)
class Graded:
    """A graded answer in a thread, with what the reply needs to offer next."""

    result: dict[str, Any]
    kind: str
    thread_ts: str


class UnknownTopicError(NotFoundError):
    """A quiz topic that is not in the taxonomy."""


def resolve_topic(taxonomy_path: Path, text: str) -> str | None:
    """The taxonomy topic named by the text (typos tolerated); None for no text; error for an unknown one."""
    if not text.strip():
        return None
    vocab = vocabulary(taxonomy_path)
    found = vocab.topic(tokens(text))
    if found is None:
        names = ", ".join(sorted(vocab.topic_names))
        raise UnknownTopicError(f"I have no questions on “{text.strip()}”. Topics: {names}")
    return found.key


def start_quiz(
    factory: sessionmaker[Session], who: Who, topic: str | None, *, length: int
) -> tuple[str, str, dict[str, Any]]:
    """A new quiz session of `length` questions for the Slack user: (learner id, session id, first question
    or a 'done' marker)."""
    with transaction(factory) as session:
        learner = learner_for_ref(session, who.ref, who.name)
        quiz = create_session(
            session,
            learner_id=learner.id,
            topics=[topic] if topic else [],
            length=length,
            mode="adaptive",
        )
        return learner.id, quiz.id, next_question(session, quiz)


def remember_post(factory: sessionmaker[Session], where: Where, *, kind: str, **ids: str | None) -> None:
    """Remember a question message the bot posted, so answers in its thread find their session."""
    with transaction(factory) as session:
        repo.save_post(
            session, team_id=where.team_id, channel_id=where.channel_id, ts=where.thread_ts, kind=kind, **ids
        )


def next_in_thread(factory: sessionmaker[Session], who: Who, where: Where) -> dict[str, Any] | None:
    """The next question of the quiz the thread belongs to; None when it is not this user's quiz."""
    with transaction(factory) as session:
        post = repo.find_post(session, team_id=where.team_id, channel_id=where.channel_id, ts=where.thread_ts)
        learner = learner_for_ref(session, who.ref, who.name)
        if post is None or post.kind != QUIZ or post.session_id is None or post.learner_id != learner.id:
            return None
        return next_question(session, get_session(session, post.session_id))


def _daily_session(session: Any, post: Any, learner_id: str) -> str:
    """The learner's one-question session for a daily post, created on their first answer."""
    existing = repo.answer_session_id(session, post, learner_id)
    if existing:
        return existing
    quiz = create_session(session, learner_id=learner_id, topics=[], length=1, mode=DAILY)
    quiz.current_question_id = post.question_id
    repo.link_answer_session(session, post, learner_id, quiz.id)
    return quiz.id


def answer(
    bank: Bank,
    who: Who,
    where: Where,
    text: str,
    *,
    key: str,
    question_id: str | None = None,
    choice: str | None = None,
) -> Graded | None:
    """Grade a reply (or a button) in a bot thread exactly once per key; None when nothing waits for it."""
    grading = bank.grading()
    with transaction(bank.factory) as session:
        post = repo.find_post(session, team_id=where.team_id, channel_id=where.channel_id, ts=where.thread_ts)
        if post is None:
            return None
        learner = learner_for_ref(session, who.ref, who.name)
        if post.kind == QUIZ:
            if post.learner_id != learner.id or post.session_id is None:
                return None  # someone else's quiz: their thread, not an answer to grade
            session_id = post.session_id
            question_id = question_id or get_session(session, session_id).current_question_id
        else:
            session_id = _daily_session(session, post, learner.id)
            question_id = post.question_id
        if question_id is None:
            return None  # the question was answered and the next one not asked yet
        result = submit_answer(
            session,
            grading,
            session_id=session_id,
            question_id=question_id,
            answer=text,
            choice=choice,
            idempotency_key=key,
        )
        return Graded(result, post.kind, where.thread_ts)


def appeal(factory: sessionmaker[Session], who: Who, attempt_id: str) -> dict[str, Any]:
    """'I was right': file an appeal on the user's own attempt."""
    with transaction(factory) as session:
        learner = learner_for_ref(session, who.ref, who.name)
        return file_appeal(
            session, attempt_id=attempt_id, claimed="correct", comment="Slack: I was right", learner_id=learner.id
        )


def concept(bank: Bank, text: str, taxonomy_path: Path | None = None) -> dict[str, Any]:
    """The ask path's answer (study-note passages, cited) or its "the notes don't cover that", naming
    the nearest topics by their taxonomy names."""
    encoder, index = bank.require()
    names = vocabulary(taxonomy_path).topic_names if taxonomy_path is not None else None
    with transaction(bank.factory) as session:
        return ask(session, encoder, index, text, names)


def stats(factory: sessionmaker[Session], who: Who) -> dict[str, Any]:
    """The user's progress: answers, streak, due reviews, mastery per topic."""
    with transaction(factory) as session:
        learner = learner_for_ref(session, who.ref, who.name)
        return progress(session, learner.id)
