"""The heavy objects a process needs (engine, encoder, index), built once and passed around."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from app.answers.cache import BankCache, BankEntry
from app.answers.rubrics import RubricBook
from app.ask.relevance import RelevanceError, default_relevance
from app.config import Settings
from app.db import (
    SERVING_AUTOCHECKPOINT_PAGES,
    checkpoint_wal,
    make_engine,
    make_sessionmaker,
    schema_is_current,
    transaction,
    upgrade,
)
from app.errors import TutorError, UnavailableError
from app.grading.decision import load_bank_decision, load_decision
from app.grading.examples import load_head
from app.grading.foreign import load_foreign
from app.grading.judges import load_judge, serving_late_judge, use_judge, use_late_judge
from app.grading.pairjudge import JudgeArtifactError
from app.grading.roles import authored_roles
from app.keys.service import Caller
from app.models import BankState
from app.serving.aio import SingleFlight
from app.serving.cache import LRUCache
from app.serving.encoders import EncoderFactory, default_encoder
from app.serving.journal import AttemptJournal
from app.serving.memtrim import heap_trimmer
from app.serving.writes import GroupWriter
from ingest.embedder import Encoder
from ingest.index import INDEX_VERSION_KEY, IndexDamagedError, LoadedIndex, load_index
from ingest.onnx_encoder import EncoderArtifactError, EncoderIntegrityError

log = logging.getLogger(__name__)

# Errors whose messages are written for clients: short, naming no server path. Any other error's
# message (a library's, which may name files and its own internals) stays in the log.
CLIENT_SAFE_ERRORS = (
    TutorError, IndexDamagedError, EncoderArtifactError, EncoderIntegrityError, JudgeArtifactError, RelevanceError
)


def not_ready_reason(exc: Exception, stage: str) -> str:
    """Why the service is not ready, as /readyz and every 503 say it: the message of one of our
    errors, or else only which part failed to load."""
    if isinstance(exc, CLIENT_SAFE_ERRORS):
        return str(exc)
    return f"the {stage} failed to load (see the server log)"

TRIM_S = 5.0  # how often a serving process hands freed heap memory back (app/serving/memtrim.py)
CHECKPOINT_S = 0.5  # how often a serving process checkpoints SQLite's write-ahead log (app/db.py)


def _autocheckpoint(background_checkpoints: bool) -> int | None:
    """The log size at which a commit checkpoints: the backstop when a housekeeping thread does it."""
    return SERVING_AUTOCHECKPOINT_PAGES if background_checkpoints else None


def batched(settings: Settings, encoder: Encoder) -> Encoder:
    """Wrap the serving encoder in the micro-batcher."""
    from app.serving.batching import BatchingEncoder

    workers, _ = settings.encoder_parallelism
    if workers > 1 and not getattr(encoder, "concurrent_calls", False):
        # sentence-transformers sets its fast tokenizer's padding on every call, and the tokenizer
        # refuses a second thread meanwhile ("Already borrowed"): one batch at a time.
        if settings.encoder_workers:
            log.warning("%s takes one call at a time; ignoring TUTOR_ENCODER_WORKERS=%d", type(encoder).__name__,
                        workers)
        workers = 1
    return BatchingEncoder(
        encoder,
        max_wait_ms=settings.batch_wait_ms,
        max_batch=settings.batch_max,
        max_queue=settings.batch_queue,
        workers=workers,
    )


@dataclass
class Runtime:
    """Engine, session factory, encoder and index for one process."""

    settings: Settings
    engine: Engine
    factory: sessionmaker[Session]
    encoder_factory: EncoderFactory = default_encoder
    # Serving: commits leave SQLite's checkpoints to the housekeeping thread (`watch`).
    background_checkpoints: bool = False
    encoder: Encoder | None = None
    problem: str | None = "starting"
    writer: GroupWriter = field(init=False)
    callers: LRUCache[str, Caller] = field(init=False)  # authenticated keys by secret hash
    questions: BankCache = field(init=False)
    # Reads that refill those two caches, one at a time per key however many requests wait for it.
    key_reads: SingleFlight[str, Caller] = field(init=False)
    question_reads: SingleFlight[tuple[str, str], BankEntry] = field(init=False)
    # The grading API's attempt journal, when the app keeps one (app/main.py).
    journal: AttemptJournal | None = None
    _write_engine: Engine = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # The index and the rubrics of one load, replaced together (one assignment): grading reads both.
    _bank: tuple[LoadedIndex, RubricBook] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def index(self) -> LoadedIndex | None:
        """The live index, once loaded."""
        return self._bank[0] if self._bank is not None else None

    @property
    def rubrics(self) -> RubricBook | None:
        """The rubrics loaded with the live index."""
        return self._bank[1] if self._bank is not None else None

    def __post_init__(self) -> None:
        # Its own connection: request threads hold pool connections while they wait for it.
        self._write_engine = make_engine(self.settings.db_url, pool_size=1,
                                         wal_autocheckpoint=_autocheckpoint(self.background_checkpoints))
        self.writer = GroupWriter(make_sessionmaker(self._write_engine))
        self.callers = LRUCache(10_000, ttl_s=self.settings.key_cache_s)
        self.questions = BankCache(ttl_s=self.settings.bank_cache_s)
        self.key_reads = SingleFlight()
        self.question_reads = SingleFlight()

    @classmethod
    def create(cls, settings: Settings, encoder_factory: EncoderFactory = default_encoder, *,
               background_checkpoints: bool = False) -> Runtime:
        """Connect to the database (nothing heavy is loaded yet). `background_checkpoints`: for a
        serving process, whose `watch` checkpoints SQLite's log so that its commits need not."""
        engine = make_engine(settings.db_url, wal_autocheckpoint=_autocheckpoint(background_checkpoints))
        return cls(settings, engine, make_sessionmaker(engine), encoder_factory, background_checkpoints)

    def migrate(self) -> None:
        """Bring the schema up to date."""
        upgrade(self.engine)

    def load(self, *, ask_head: bool = True) -> None:
        """Load the encoder and the live index; record what is wrong instead of raising. Without
        `ask_head` the ask relevance head is not checked (`tutor models fit-ask` refits it)."""
        with self._lock:
            stage = "database schema"
            try:
                if not schema_is_current(self.engine):
                    raise UnavailableError("database schema is not up to date; run `tutor ingest`")
                stage = "encoder"
                if self.encoder is None:
                    self.encoder = batched(self.settings, self.encoder_factory(self.settings))
                # The grader's pair judge, decision, its two heads and the authored roles, loaded (and
                # the judge's files checked against its manifest) before the service says it is ready.
                stage = "judge"
                use_judge(load_judge(self.settings.judge_dir, self.encoder))
                stage = "late judge"  # read by the bank decision beside the pair judge, from the encoder's states
                use_late_judge(serving_late_judge(self.settings.late_judge_dir, self.encoder))
                stage = "grading decision"
                load_decision()
                load_bank_decision()
                stage = "example head"
                load_head()
                stage = "foreign head"
                load_foreign()
                stage = "authored roles"  # data/roles.yaml, checked now rather than on the first answer
                authored_roles()
                stage = "ask relevance head"
                if ask_head:
                    default_relevance()
                stage = "index"  # its files are checked against the hashes in its manifest
                version = self._live_version()
                if version is None:
                    raise UnavailableError("the bank is empty: run `tutor ingest` first")
                self._bank = self._load_bank(self.encoder, version)
                self.problem = None
            except Exception as exc:
                self.problem = not_ready_reason(exc, stage)
                log.error("not ready: %s", exc, exc_info=not isinstance(exc, CLIENT_SAFE_ERRORS))

    def _load_bank(self, encoder: Encoder, version: str) -> tuple[LoadedIndex, RubricBook]:
        index = load_index(self.settings.index_path, version, encoder.model_id, encoder.dim)
        book = RubricBook(self.factory, encoder.model_id, lambda: encoder)
        book.build()
        return index, book

    def _live_version(self) -> str | None:
        with transaction(self.factory) as session:
            state = session.get(BankState, INDEX_VERSION_KEY)
        return state.value if state is not None else None

    def reload_if_changed(self) -> bool:
        """Load the bank again when an ingestion has made a newer index live; True when it did.

        Until the new index and rubrics are loaded, requests keep the old ones, and a version that
        fails to load is logged and left: the API goes on serving what it had (a failed first
        load is `load`'s business, not this).
        """
        with self._lock:
            if self.problem is not None or self.encoder is None or self.index is None:
                return False
            current, encoder = self.index.version, self.encoder
        try:
            version = self._live_version()
            if version is None or version == current:
                return False
            index, book = self._load_bank(encoder, version)
        except Exception as exc:
            log.error("still serving index %s: the newer one did not load: %s", current[:16], exc)
            return False
        with self._lock:
            self._bank = index, book
        log.info("now serving index %s (was %s)", index.version[:16], current[:16])
        return True

    def watch(self, every_s: float, trim_s: float = TRIM_S) -> None:
        """Housekeeping on background threads: look for a newer ingestion every `every_s` seconds
        (0: never), hand freed heap memory back to the system every `trim_s` (0: never), and with
        `background_checkpoints` on SQLite, checkpoint its write-ahead log every CHECKPOINT_S."""
        trim = heap_trimmer() if trim_s > 0 else None
        if every_s > 0:
            self._every(every_s, self.reload_if_changed, "bank-reload")
        if trim is not None:
            self._every(trim_s, trim, "heap-trim")
        if self.background_checkpoints and self.engine.dialect.name == "sqlite":
            self._every(CHECKPOINT_S, lambda: checkpoint_wal(self.engine), "wal-checkpoint")

    def _every(self, period_s: float, task: Callable[[], object], name: str) -> None:
        """Run `task` every `period_s` on a daemon thread until close; a run that raises is logged."""

        def loop() -> None:
            while not self._stop.wait(period_s):
                try:
                    task()
                except Exception:  # one failed run must not end the next ones
                    log.exception("housekeeping task %s failed", name)

        threading.Thread(target=loop, name=name, daemon=True).start()

    def check_database(self) -> None:
        """Raise when the database cannot be reached."""
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except Exception as exc:
            raise UnavailableError(f"database unreachable: {type(exc).__name__}") from exc

    @property
    def backend(self) -> str:
        """Which encoder serves: onnx, torch, or the class name of an injected one."""
        inner = getattr(self.encoder, "inner", self.encoder)
        return {"OnnxEncoder": "onnx", "SentenceTransformerEncoder": "torch"}.get(
            type(inner).__name__, type(inner).__name__
        )

    def require(self) -> tuple[Encoder, LoadedIndex]:
        """The encoder and index, or a 503 error saying why they are not ready."""
        encoder, index, _ = self.grading()
        return encoder, index

    def grading(self) -> tuple[Encoder, LoadedIndex, RubricBook]:
        """Everything grading needs (an index and the rubrics of the same load), or a 503 error."""
        encoder, bank = self.encoder, self._bank
        if self.problem or encoder is None or bank is None:
            raise UnavailableError(f"not ready: {self.problem or 'loading'}")
        return encoder, *bank

    def close(self) -> None:
        """Stop watching for ingestions, store the journal, finish queued writes and release connections."""
        self._stop.set()
        if self.journal is not None:  # its last move goes through the writer
            self.journal.close()
        self.writer.close()
        self._write_engine.dispose()
        self.engine.dispose()
