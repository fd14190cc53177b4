"""The API (TestClient of create_app, fake encoder, SQLite) pointed at a real `tutor worker` process."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from tests.app.demos.helpers import api_client
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.fakes import FakeEncoder
from tests.worker.helpers import TOKEN, free_port, start_worker, stop


@pytest.fixture(scope="session")
def demo_worker_url() -> Iterator[str]:
    """A CPU worker for the API tests (queue of 1: the tests run one demo at a time)."""
    port = free_port()
    proc = start_worker(port, TUTOR_WORKER_MAX_QUEUE="1")
    yield f"http://127.0.0.1:{port}"
    stop(proc)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data folder and SQLite bank ingested once for the demo tests."""
    data = tmp_path_factory.mktemp("demos") / "data"
    shutil.copytree(SEEDS, data / "raw")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'tutor.db'}")
    ingest_with(settings, FakeEncoder())
    return settings


@pytest.fixture(scope="session")
def api(demo_data: Settings, demo_worker_url: str) -> Iterator[TestClient]:
    """The API, configured for the running worker."""
    with api_client(demo_data, worker_url=demo_worker_url, worker_token=TOKEN, worker_timeout_s=5.0) as client:
        yield client
