"""Engine, sessions and schema migrations."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.orm import Session, sessionmaker

from app.config import WORKER_THREADS
from app.errors import NotFoundError

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# The newest migration's revision: checked at start-up without importing Alembic (tests keep it
# equal to Alembic's head).
HEAD_REVISION = "0007"


# SQLite copies the write-ahead log back into the database file (a checkpoint) on the commit that
# takes the log past this many pages, on that commit's thread. A serving process checkpoints on a
# housekeeping thread instead (`checkpoint_wal`), and its own commits only past this backstop.
# Only a writer can restart the log, and only once it is wholly copied, which a checkpoint on
# another thread rarely leaves it while commits keep coming: so under steady writes the log grows
# to the backstop, where one commit copies the little left since the last background checkpoint
# and the log starts again. About 40 MB of log on disk at most.
SERVING_AUTOCHECKPOINT_PAGES = 10_000


def make_engine(url: str, pool_size: int = WORKER_THREADS, wal_autocheckpoint: int | None = None) -> Engine:
    """Create an engine; SQLite gets a busy timeout, foreign keys, WAL for concurrent readers, and
    savepoints that commit with their transaction (`_begin_before_savepoint`).

    `wal_autocheckpoint`: pages of log after which a commit checkpoints (SQLite: 1,000 when None).
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # As many connections as the server's worker threads; admission
        # control (app/serving/admission.py) keeps fewer requests than that inside the app at once.
        engine = create_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=pool_size, max_overflow=0,
            hide_parameters=True,  # statements in logs and errors never carry learners' answers
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a crash of the process loses nothing committed; only a power cut may
            # lose the last transactions. Saves an fsync on every commit of the request path.
            cur.execute("PRAGMA synchronous=NORMAL")
            if wal_autocheckpoint is not None:
                cur.execute(f"PRAGMA wal_autocheckpoint={int(wal_autocheckpoint)}")
            cur.close()

        event.listen(engine, "savepoint", _begin_before_savepoint)
        return engine
    return create_engine(url, pool_pre_ping=True, hide_parameters=True, pool_size=min(pool_size, 5),
                         max_overflow=max(pool_size - 5, 0))


def _begin_before_savepoint(conn: Connection, _name: str) -> None:
    """SQLite: open the transaction a SAVEPOINT belongs to (`session.begin_nested()`), so that
    releasing the savepoint does not commit.

    The sqlite3 driver starts a transaction by itself only before INSERT, UPDATE and DELETE. A
    SAVEPOINT issued outside a transaction starts one of its own, and its RELEASE then commits
    whatever the savepoint wrote while the enclosing session still had more to write: a crash, an
    error or a concurrent reader in between saw half of the unit of work (an attempt without its
    schedule). With BEGIN first, the savepoint's writes commit or roll back with the session's.

    IMMEDIATE takes the write lock now, waiting for it up to the busy timeout. A savepoint is opened
    to write, and a transaction that reads first and then writes does not wait: if another
    connection holds the lock, or committed after the read, the write fails at once with
    "database is locked".

    (SQLAlchemy's pysqlite recipe instead turns the driver's own BEGIN off and emits BEGIN when every
    transaction starts, reads included. That puts each request's reads ahead of its writes in one
    transaction, with exactly that failure: measured, most of 20 concurrent `POST /v1/sessions`
    failed with "database is locked" or 503.)
    """
    dbapi_conn = conn.connection.dbapi_connection
    if dbapi_conn is not None and not dbapi_conn.in_transaction:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def checkpoint_wal(engine: Engine) -> tuple[int, int, int] | None:
    """Copy SQLite's write-ahead log into the database file without waiting for anyone (PASSIVE):
    (1 if it could not finish, frames in the log, frames copied). None on other databases.

    Measured with commits 3 ms apart: with SQLite's own checkpoints, one commit in a hundred took
    5-10 ms instead of 0.3; with this every 0.5 s, one in five hundred (`bench/bench_api.py` p99;
    docs/PERFORMANCE.md, "SQLite"). A request that commits waits for it.
    """
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as conn:
        row = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
    return int(row[0]), int(row[1]), int(row[2])


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """A session factory bound to the engine."""
    return sessionmaker(engine, expire_on_commit=False)


_ON_CONFLICT_DIALECTS = ("postgresql", "sqlite")


def on_conflict_insert(session: Session | str, model: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT for the session's database (or a dialect name) that takes ON CONFLICT clauses."""
    dialect = session if isinstance(session, str) else session.get_bind().dialect.name
    if dialect not in _ON_CONFLICT_DIALECTS:
        raise NotImplementedError(f"INSERT ... ON CONFLICT is supported on SQLite and PostgreSQL, not {dialect}")
    # By name, when first used: a process on SQLite never imports PostgreSQL's dialect (~40 ms of start-up).
    insert: Callable[[Any], postgresql.Insert | sqlite.Insert] = import_module(f"sqlalchemy.dialects.{dialect}").insert
    return insert(model)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def end_reads(session: Session) -> None:
    """End the request's read-only part before it writes.

    On SQLite (WAL) a transaction that read and then writes after another connection committed
    fails at once with "database is locked" (its snapshot is stale; the busy timeout does not
    apply). Writing in a fresh transaction makes writers queue for the lock instead.
    """
    if not session.new and not session.dirty and not session.deleted:
        session.commit()


def _alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest migration."""
    from alembic import command

    cfg = _alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def schema_is_current(engine: Engine) -> bool:
    """True when the database is at the newest migration (one query; Alembic is not imported)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return False
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD_REVISION


def migrations_head() -> str | None:
    """The newest revision according to Alembic's own reading of the migration scripts."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config("sqlite://")).get_current_head()


RowT = TypeVar("RowT")


def get_or_404(session: Session, model: type[RowT], ident: str, what: str) -> RowT:
    """A row by primary key, or a 404 naming what was looked for ("no learner with id ...")."""
    row = session.get(model, ident)
    if row is None:
        raise NotFoundError(f"no {what} with id {ident!r}", details={"id": ident})
    return row
