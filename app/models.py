"""Typed SQLAlchemy models of the question bank."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Timezone-aware now, for timestamps."""
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """The same instant as an aware UTC datetime (SQLite hands back naive ones)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so migrations name constraints predictably."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


ACTIVE = "active"
RETIRED = "retired"


class Question(Base):
    """A bank question with its answers, explanation and where it came from."""

    __tablename__ = "questions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    concept_id: Mapped[str] = mapped_column(String(32), index=True)
    document: Mapped[str] = mapped_column(String(255), index=True)
    source_path: Mapped[str] = mapped_column(String(1024))
    layout: Mapped[str] = mapped_column(String(32))
    number: Mapped[int] = mapped_column(Integer)
    line_start: Mapped[int] = mapped_column(Integer)
    line_end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    accepted_answers: Mapped[list[str]] = mapped_column(JSON)
    wrong_options: Mapped[list[str]] = mapped_column(JSON)
    explanation: Mapped[str | None] = mapped_column(Text, nullable=True)
    topics: Mapped[list[str]] = mapped_column(JSON)
    notes: Mapped[list[str]] = mapped_column(JSON)
    extra_answers: Mapped[list[str]] = mapped_column(JSON)
    examples: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    content_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default=ACTIVE, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Passage(Base):
    """A passage of a study note (one paragraph under its headings), cited by file, heading and lines."""

    __tablename__ = "passages"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    note: Mapped[str] = mapped_column(String(255), index=True)
    source_path: Mapped[str] = mapped_column(String(1024))
    title: Mapped[str] = mapped_column(Text)
    topics: Mapped[list[str]] = mapped_column(JSON)
    heading_path: Mapped[list[str]] = mapped_column(JSON)
    position: Mapped[int] = mapped_column(Integer)
    line_start: Mapped[int] = mapped_column(Integer)
    line_end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    citations: Mapped[list[dict[str, Any]]] = mapped_column(JSON)  # the references the text cites
    explains: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    asks: Mapped[list[str]] = mapped_column(JSON, default=list)  # questions its section answers (the note's `asks`)
    content_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default=ACTIVE, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class QuestionPassage(Base):
    """A note passage that explains a bank question (from the note's `explains`), in reading order."""

    __tablename__ = "question_passages"

    question_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    passage_id: Mapped[str] = mapped_column(ForeignKey("passages.id"), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(Integer)


class Embedding(Base):
    """A cached vector for one text under one model: unchanged text is never embedded twice."""

    __tablename__ = "embeddings"

    model_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    text_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BankState(Base):
    """Small key/value facts about the bank, committed with it (e.g. the live index version)."""

    __tablename__ = "bank_state"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Learner(Base):
    """A learner, known by an opaque id the API issues; widget and Slack users map onto one."""

    __tablename__ = "learners"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    external_ref: Mapped[str | None] = mapped_column(String(255), unique=True, nullable=True)
    display_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class QuizSession(Base):
    """A quiz session: which learner, which topics, how long, in which mode."""

    __tablename__ = "quiz_sessions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    mode: Mapped[str] = mapped_column(String(16))
    topics: Mapped[list[str]] = mapped_column(JSON)
    length: Mapped[int] = mapped_column(Integer)
    current_question_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Attempt(Base):
    """One graded answer, with everything needed to review the verdict later."""

    __tablename__ = "attempts"
    __table_args__ = (
        UniqueConstraint("session_id", "question_id", name="uq_attempts_session_question"),
        UniqueConstraint("session_id", "idempotency_key", name="uq_attempts_session_key"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    learner_id: Mapped[str | None] = mapped_column(ForeignKey("learners.id"), index=True, nullable=True)
    session_id: Mapped[str | None] = mapped_column(ForeignKey("quiz_sessions.id"), index=True, nullable=True)
    question_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)
    rubric_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    api_key_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(128), nullable=True)
    answer: Mapped[str] = mapped_column(Text)
    choice: Mapped[str | None] = mapped_column(String(16), nullable=True)
    verdict: Mapped[str] = mapped_column(String(16))
    score: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float] = mapped_column(Float)
    rating: Mapped[int | None] = mapped_column(Integer, nullable=True)
    card_before: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    grader_version: Mapped[str] = mapped_column(String(64))
    model_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class Card(Base):
    """The FSRS memory state of one question for one learner."""

    __tablename__ = "cards"

    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), primary_key=True)
    question_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    due: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    reviews: Mapped[int] = mapped_column(Integer, default=0)
    last_rating: Mapped[int | None] = mapped_column(Integer, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Appeal(Base):
    """A learner's "I was right" on an attempt; both verdicts are kept for authors to review."""

    __tablename__ = "appeals"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id"), unique=True)
    learner_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    question_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)
    original_verdict: Mapped[str] = mapped_column(String(16))
    claimed_verdict: Mapped[str] = mapped_column(String(16))
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="open", index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class LabelledExample(Base):
    """A labelled answer that grading uses as evidence (from accepted appeals or authors)."""

    __tablename__ = "labelled_examples"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    question_id: Mapped[str] = mapped_column(String(32), index=True)
    answer: Mapped[str] = mapped_column(Text)
    label: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiKey(Base):
    """An API key for the public grading API; only a hash of the secret is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list[str]] = mapped_column(JSON)
    rate_limit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ApiUsage(Base):
    """Calls per key, per day and endpoint."""

    __tablename__ = "api_usage"

    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"), primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(64), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    items: Mapped[int] = mapped_column(Integer, default=0)


class StoredRubric(Base):
    """A client's registered question with everything about it precomputed for grading."""

    __tablename__ = "rubrics"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    api_key_id: Mapped[str | None] = mapped_column(String(40), index=True, nullable=True)
    question: Mapped[str] = mapped_column(Text)
    reference_answers: Mapped[list[str]] = mapped_column(JSON)
    wrong_answers: Mapped[list[str]] = mapped_column(JSON)
    examples: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    prepared: Mapped[dict[str, Any]] = mapped_column(JSON)
    model_id: Mapped[str] = mapped_column(String(128))
    grader_version: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChatToken(Base):
    """A learner's opaque chat token; only its hash is stored, so a leaked database reveals no tokens."""

    __tablename__ = "chat_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Conversation(Base):
    """A chat conversation of one learner, with its dialogue state (pending quiz, hints, level)."""

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), index=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChatMessage(Base):
    """One message of a conversation: the learner's text, or a tutor reply with its structure."""

    __tablename__ = "chat_messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    reply: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SlackPost(Base):
    """A question the bot posted in Slack: a learner's quiz thread or a channel's daily question."""

    __tablename__ = "slack_posts"
    __table_args__ = (UniqueConstraint("team_id", "channel_id", "ts", name="uq_slack_posts_message"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    team_id: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(32))
    ts: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16), index=True)
    question_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    learner_id: Mapped[str | None] = mapped_column(ForeignKey("learners.id"), nullable=True)
    session_id: Mapped[str | None] = mapped_column(ForeignKey("quiz_sessions.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class SlackPostSession(Base):
    """The one-question session of a learner answering a daily question."""

    __tablename__ = "slack_post_sessions"

    post_id: Mapped[int] = mapped_column(ForeignKey("slack_posts.id"), primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id"), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("quiz_sessions.id"), unique=True)


class SlackEvent(Base):
    """A Slack event id already handled, so Slack's retries are never processed twice."""

    __tablename__ = "slack_events"

    event_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SlackInstallation(Base):
    """A workspace's installation of the app (OAuth); `key` is client:enterprise:team:user."""

    __tablename__ = "slack_installations"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64))
    enterprise_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    team_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)
    user_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    installed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SlackOAuthState(Base):
    """A one-time OAuth `state` value, valid until it expires."""

    __tablename__ = "slack_oauth_states"

    state: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class DemoWorker(Base):
    """A demo worker as its heartbeats describe it: hardware, the queues it takes from, when last heard."""

    __tablename__ = "demo_workers"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    hardware: Mapped[dict[str, Any]] = mapped_column(JSON)
    queues: Mapped[list[str]] = mapped_column(JSON)
    held: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), index=True)  # live, lost, stopped
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class DemoJob(Base):
    """One execution of a demo with given parameters on a kind of hardware; runs (requests) point at it."""

    __tablename__ = "demo_jobs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    demo: Mapped[str] = mapped_column(String(32), index=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    params_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(80))
    queue: Mapped[str] = mapped_column(String(120), index=True)
    world_size: Mapped[int] = mapped_column(Integer)
    cost: Mapped[int] = mapped_column(BigInteger)
    # Set while the job is live: the same demo, parameters and hardware kind are then joined, not run twice.
    dedupe_key: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    # queued, claimed (a worker waits for its devices), running, succeeded, failed, cancelled
    status: Mapped[str] = mapped_column(String(16), index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    attempts: Mapped[list[dict[str, Any]]] = mapped_column(JSON)  # earlier attempts: worker, error
    seq_base: Mapped[int] = mapped_column(Integer, default=1)
    worker_id: Mapped[str | None] = mapped_column(String(80), index=True, nullable=True)
    hardware: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    pgid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    result_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    watched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DemoJobEvent(Base):
    """A job's progress event (status, progress), numbered; applied once however often it is reported."""

    __tablename__ = "demo_job_events"

    job_id: Mapped[str] = mapped_column(ForeignKey("demo_jobs.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(16))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DemoResult(Base):
    """A measurement: a succeeded job's result, where and when it was measured (the results history)."""

    __tablename__ = "demo_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(40), unique=True)
    demo: Mapped[str] = mapped_column(String(32), index=True)
    params_hash: Mapped[str] = mapped_column(String(64), index=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    kind: Mapped[str] = mapped_column(String(80))
    hardware: Mapped[dict[str, Any]] = mapped_column(JSON)
    worker_id: Mapped[str | None] = mapped_column(String(80), nullable=True)
    measured_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)


class DemoRun(Base):
    """A learner's or key's request for a demo: a fresh job, a live one joined, or a recent result reused."""

    __tablename__ = "demo_runs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("demo_jobs.id"), index=True)
    requester_kind: Mapped[str] = mapped_column(String(8))  # learner, key
    requester_id: Mapped[str] = mapped_column(String(40), index=True)
    answer: Mapped[str] = mapped_column(String(8))  # fresh, shared, reused
    cancelled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
