"""Shared fixtures: a temporary data folder, both databases, the fake and the real encoder."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner, Result

from app.answers.rubrics import embed_rubric_texts
from app.config import Settings, get_settings
from app.db import make_engine, make_sessionmaker, upgrade
from ingest.embedder import Encoder
from ingest.pipeline import IngestConfig, IngestSummary, run_ingest
from tests.fakes import FakeEncoder

Tutor = Callable[..., Result]

ROOT = Path(__file__).resolve().parent.parent


def normalised(text: object) -> str:
    """A text as the leak checks compare training and evaluation texts: lower case, punctuation as spaces."""
    return re.sub(r"\W+", " ", str(text).lower()).strip()
SEEDS = ROOT / "data" / "raw"
PG_URL = os.environ.get("TUTOR_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data folder like the project's: raw seeds, taxonomy and annotations."""
    data = tmp_path / "data"
    shutil.copytree(SEEDS, data / "raw")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    return data


@pytest.fixture(scope="session")
def postgres_available() -> bool:
    """Whether the local PostgreSQL answers; CI must have it unless told otherwise."""
    try:
        with create_engine(PG_URL).connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        if os.environ.get("TUTOR_SKIP_POSTGRES") == "1":
            return False
        raise


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database: a SQLite file, or a throw-away schema in the local PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tutor.db'}"
        return
    if not request.getfixturevalue("postgres_available"):
        pytest.skip("TUTOR_SKIP_POSTGRES=1 and no PostgreSQL")
    with pg_schema("t") as url:
        yield url


@contextmanager
def pg_schema(prefix: str) -> Iterator[str]:
    """A throw-away schema in the local PostgreSQL; yields a URL whose search_path is that schema."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def settings(data_dir: Path, db_url: str) -> Settings:
    """Settings pointing at the temporary data folder and database."""
    return Settings(data_dir=data_dir, database_url=db_url)


@pytest.fixture
def fake_encoder() -> FakeEncoder:
    """A fast deterministic encoder."""
    return FakeEncoder()


@pytest.fixture(scope="session")
def real_encoder() -> Encoder:
    """The real bundled model, loaded once per test session."""
    from ingest.embedder import SentenceTransformerEncoder

    return SentenceTransformerEncoder()


def ingest_with(settings: Settings, encoder: Encoder, paths: list[Path] | None = None) -> IngestSummary:
    """Run an ingestion the way `tutor ingest` does, with the given encoder."""
    engine = make_engine(settings.db_url)
    try:
        upgrade(engine)
        config = IngestConfig(
            settings.index_path, settings.taxonomy_path, settings.annotations_path, precompute=embed_rubric_texts
        )
        return run_ingest(
            paths or [settings.raw_path], make_sessionmaker(engine), encoder.model_id, lambda: encoder, config
        )
    finally:
        engine.dispose()


@pytest.fixture
def tutor(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tutor]:
    """Run `tutor ...` in-process with the environment pointing at the test's data folder and database."""
    for name in [n for n in os.environ if n.startswith("TUTOR_")]:
        monkeypatch.delenv(name)
    env = {"TUTOR_DATA_DIR": str(settings.data_dir), "TUTOR_DATABASE_URL": settings.db_url}
    from app.cli.main import app

    runner = CliRunner()
    get_settings.cache_clear()

    def run(*args: str, code: int = 0) -> Result:
        result = runner.invoke(app, list(args), env=env)
        assert result.exit_code == code, (result.output, result.exception)
        return result

    yield run
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def onnx_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real model exported to int8 ONNX once per test session (what `tutor models export` makes)."""
    from ingest.embedder import DEFAULT_MODEL
    from ingest.onnx_export import export_encoder

    return export_encoder(DEFAULT_MODEL, tmp_path_factory.mktemp("onnx")).folder


@pytest.fixture(scope="session")
def served_late_judge(onnx_encoder_dir: Path) -> object:
    """The committed late judge on the int8 export's states, as the service reads it."""
    from app.config import LATE_JUDGE_DIR
    from app.grading.latejudge import LateJudge, read_late_manifest
    from ingest.embedder import DEFAULT_MODEL, model_id_for
    from ingest.onnx_encoder import OnnxEncoder

    layer = int(read_late_manifest(LATE_JUDGE_DIR)["states_layer"])
    return LateJudge(LATE_JUDGE_DIR, OnnxEncoder(onnx_encoder_dir, model_id_for(DEFAULT_MODEL), states_layer=layer))


@pytest.fixture
def as_served(served_late_judge: object) -> Iterator[None]:
    """Grading in this test reads bank questions' answers with the late judge too, as the service does."""
    from app.grading.judges import use_late_judge

    use_late_judge(served_late_judge)  # type: ignore[arg-type]
    yield


@pytest.fixture(autouse=True)
def _late_judge_left_unset() -> Iterator[None]:
    """No test leaves a late judge chosen for the next (the runtime and `as_served` choose one)."""
    yield
    from app.grading.judges import use_late_judge

    use_late_judge(None)


def with_onnx(index_dir: Path, exported: Path) -> None:
    """Place an exported encoder where the service looks for it, beside the index."""
    shutil.copytree(exported, index_dir / "encoders" / exported.name, dirs_exist_ok=True)
