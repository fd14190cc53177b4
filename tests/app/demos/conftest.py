"""The API (TestClient of create_app, fake encoder, SQLite) and a real `tutor worker` process sharing a SQLite
job queue; calls carry an author API key unless a test says otherwise."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from tests.app.demos.helpers import api_client, author_key, wait_for_worker
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.fakes import FakeEncoder
from tests.worker.helpers import TOKEN, free_port, start_worker, stop


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data folder and SQLite bank ingested once for the demo tests; the job queue is a file beside it."""
    data = tmp_path_factory.mktemp("demos") / "data"
    shutil.copytree(SEEDS, data / "raw")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(
        data_dir=data, database_url=f"sqlite:///{data / 'tutor.db'}", worker_token=TOKEN,
        demo_queue_url=str(data / "queue.db"), demo_max_queue=1, demo_max_live_per_key=8,
    )
    ingest_with(settings, FakeEncoder())
    return settings


@pytest.fixture(scope="session")
def demo_worker(demo_data: Settings) -> Iterator[str]:
    """A CPU worker taking jobs from the queue (gloo runs of up to 2 ranks)."""
    proc = start_worker(free_port(), TUTOR_WORKER_QUEUE_URL=str(demo_data.demo_queue), TUTOR_WORKER_CPU_RANKS="2",
                        TUTOR_WORKER_HEARTBEAT_S="0.5")
    yield str(demo_data.demo_queue)
    stop(proc)


@pytest.fixture(scope="session")
def api(demo_data: Settings, demo_worker: str) -> Iterator[TestClient]:
    """The API with an author key in every call, once the worker has registered."""
    with api_client(demo_data) as client:
        client.headers["X-API-Key"] = author_key(demo_data)
        wait_for_worker(client)
        yield client
