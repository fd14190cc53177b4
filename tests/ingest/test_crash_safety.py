"""kill -9 at any point of an ingestion leaves a bank and an index that match."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.models import BankState
from ingest.index import load_index
from tests.conftest import ROOT, ingest_with
from tests.fakes import FakeEncoder
from tests.ingest.test_pipeline import _rows


def _live_version(settings: Settings) -> str:
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as session:
        state = session.get(BankState, "index_version")
    engine.dispose()
    assert state is not None
    return state.value


def _edit_a_question(settings: Settings) -> None:
    path = settings.raw_path / "002_1f1c560eb3b82a3f.txt"
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "Data parallelism + tensor parallelism + pipeline parallelism", "Data, tensor and pipeline parallelism"
        ),
        encoding="utf-8",
    )


def _crash(settings: Settings, stage: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.ingest.crash_child", settings.db_url, str(settings.data_dir), stage],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


@pytest.mark.parametrize("stage", ["embed", "index", "commit"])
def test_kill_before_commit_keeps_previous_bank_and_index(
    settings: Settings, fake_encoder: FakeEncoder, stage: str
) -> None:
    ingest_with(settings, fake_encoder)
    rows, version = _rows(settings), _live_version(settings)
    _edit_a_question(settings)
    _crash(settings, stage)
    assert _rows(settings) == rows
    assert _live_version(settings) == version
    index = load_index(settings.index_path, version, fake_encoder.model_id, fake_encoder.dim)
    assert len({e.question_id for e in index.entries}) == 42
    summary = ingest_with(settings, fake_encoder)  # the next run finishes the job
    assert summary.updated == 1 and summary.questions == 42
    assert not [p for p in settings.index_path.iterdir() if p.name.startswith(".tmp-")]
    assert len(list(settings.index_path.iterdir())) == 1  # old versions cleaned up


def test_kill_after_commit_serves_the_new_bank(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    old_version = _live_version(settings)
    _edit_a_question(settings)
    _crash(settings, "cleanup")
    version = _live_version(settings)
    assert version != old_version
    load_index(settings.index_path, version, fake_encoder.model_id, fake_encoder.dim)
    assert ingest_with(settings, fake_encoder).unchanged == 42
